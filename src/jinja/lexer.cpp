#include "jinja/lexer.h"

#include <cerrno>
#include <cstdlib>

#include "jinja/error.h"
#include "jinja/python_text.h"

namespace revis::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// jinja2 strips with Python's notion of whitespace (str.rstrip, regex \s).
std::string rstrip_ws(const std::string& s) { return py_strip(s, false, true); }

size_t skip_ws(std::string_view s, size_t p) {
  // The leading part of s from p that Python's \s* matches.
  while (p < s.size()) {
    if (is_space(s[p])) {
      ++p;
      continue;
    }
    if (static_cast<unsigned char>(s[p]) < 0x80) break;
    size_t len = 1;
    while (p + len < s.size() && (static_cast<unsigned char>(s[p + len]) & 0xc0) == 0x80) ++len;
    const std::vector<uint32_t> cp = utf8_decode(s.substr(p, len));
    if (cp.size() != 1 || !py_isspace(cp[0])) break;
    p += len;
  }
  return p;
}

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's "unicode-escape" decoding of a string literal's body.
std::string unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    auto hex = [&](size_t n) -> bool {
      uint32_t cp = 0;
      for (size_t k = 1; k <= n; ++k) {
        if (i + k >= body.size()) return false;
        const char h = body[i + k];
        int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) return false;
        cp = cp * 16 + static_cast<uint32_t>(d);
      }
      if (cp > 0x10ffff) return false;
      utf8_append(out, cp);
      i += n;
      return true;
    };
    switch (c) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
        if (!hex(2)) throw TemplateError("line " + std::to_string(line) + ": truncated \\x escape in a string");
        break;
      case 'u':
        if (!hex(4)) throw TemplateError("line " + std::to_string(line) + ": truncated \\u escape in a string");
        break;
      case 'U':
        if (!hex(8)) throw TemplateError("line " + std::to_string(line) + ": bad \\U escape in a string");
        break;
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = 0;
          size_t n = 0;
          while (n < 3 && i < body.size() && body[i] >= '0' && body[i] <= '7') cp = cp * 8 + (body[i++] - '0'), ++n;
          --i;
          utf8_append(out, cp);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t start = find_tag(pos);
      std::string text = src_.substr(pos, start == std::string::npos ? std::string::npos : start - pos);
      if (start == std::string::npos) {
        emit_text(std::move(text), pos);
        break;
      }
      const char kind = src_[start + 1];
      const char sign = start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+') ? src_[start + 2] : 0;
      if (sign == '-') {
        text = rstrip_ws(text);
      } else if (sign != '+' && kind != '{') {
        text = lstrip_block(std::move(text), pos);
      }
      emit_text(std::move(text), pos);
      size_t p = start + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = comment(p);
      } else if (kind == '%' && raw_begin(p)) {
        pos = raw(p);
      } else {
        pos = tag(kind, start, p);
      }
    }
    push(Tok::kEof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  std::string src_;
  std::vector<Token> tokens_;
  size_t line_pos_ = 0;
  int line_ = 1;

  int line_at(size_t pos) {
    for (; line_pos_ < pos && line_pos_ < src_.size(); ++line_pos_)
      if (src_[line_pos_] == '\n') ++line_;
    return line_;
  }

  [[noreturn]] void error(size_t pos, const std::string& what) {
    throw TemplateError("line " + std::to_string(line_at(pos)) + ": " + what);
  }

  void push(Tok type, std::string text, size_t pos) { tokens_.push_back(Token{type, std::move(text), 0, 0, line_at(pos)}); }

  void emit_text(std::string text, size_t pos) {
    if (!text.empty()) push(Tok::kText, std::move(text), pos);
  }

  size_t find_tag(size_t pos) const {
    for (size_t p = src_.find('{', pos); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
    }
    return std::string::npos;
  }

  // lstrip_blocks: the indentation before a block or comment tag goes when
  // only whitespace stands between the line's start and the tag.
  std::string lstrip_block(std::string text, size_t text_pos) const {
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    const bool line_starting = text_pos == 0 || src_[text_pos - 1] == '\n';
    if (l_pos == 0 && !line_starting) return text;
    if (l_pos < text.size() && skip_ws(text, l_pos) == text.size()) text.resize(l_pos);
    return text;
  }

  // After a block or comment end: "-" strips all whitespace, "+" keeps it,
  // otherwise trim_blocks drops one newline.
  size_t after_block_end(size_t p, char sign) const {
    if (sign == '-') return skip_ws(src_, p);
    if (sign != '+' && p < src_.size() && src_[p] == '\n') return p + 1;
    return p;
  }

  size_t comment(size_t p) {
    const size_t end = src_.find("#}", p);
    if (end == std::string::npos) error(p, "unterminated comment ({# without #})");
    const char sign = end > p && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    return after_block_end(end + 2, sign);
  }

  // Matches [-+]?\s*WORD\s*[-+]?%} at p (p just after "{%"); returns the end
  // and the closing sign.
  bool keyword_tag(size_t p, std::string_view word, size_t* end, char* close_sign) const {
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = skip_ws(src_, p);
    if (src_.compare(p, word.size(), word) != 0) return false;
    p += word.size();
    if (p < src_.size() && is_name_char(src_[p])) return false;
    p = skip_ws(src_, p);
    char sign = 0;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) return false;
    if (end) *end = p + 2;
    if (close_sign) *close_sign = sign;
    return true;
  }

  bool raw_begin(size_t p) const { return keyword_tag(p, "raw", nullptr, nullptr); }

  size_t raw(size_t p) {
    size_t body = p;
    char sign = 0;
    keyword_tag(p, "raw", &body, &sign);
    if (sign == '-') body = skip_ws(src_, body);
    for (size_t q = src_.find("{%", body); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t end;
      char close;
      if (!keyword_tag(q + 2, "endraw", &end, &close)) continue;
      std::string text = src_.substr(body, q - body);
      const char open = src_[q + 2];
      if (open == '-')
        text = rstrip_ws(text);
      else if (open != '+')
        text = lstrip_block(std::move(text), body);
      emit_text(std::move(text), body);
      return after_block_end(end, close);
    }
    error(p, "unterminated {% raw %} block");
  }

  size_t tag(char kind, size_t start, size_t p) {
    const bool block = kind == '%';
    push(block ? Tok::kBlockBegin : Tok::kVarBegin, "", start);
    int depth = 0;
    for (;;) {
      p = skip_ws(src_, p);
      if (p >= src_.size()) error(start, block ? "unclosed tag ({% without %})" : "unclosed tag ({{ without }})");
      if (depth == 0) {
        const char* close = block ? "%}" : "}}";
        char sign = 0;
        size_t q = p;
        if (src_[q] == '-' || (block && src_[q] == '+')) sign = src_[q++];
        if (src_.compare(q, 2, close) == 0) {
          push(block ? Tok::kBlockEnd : Tok::kVarEnd, "", p);
          if (!block) return sign == '-' ? skip_ws(src_, q + 2) : q + 2;
          return after_block_end(q + 2, sign);
        }
      }
      p = expression_token(p, depth);
    }
  }

  size_t expression_token(size_t p, int& depth) {
    const char c = src_[p];
    if (is_name_start(c)) {
      size_t e = p;
      while (e < src_.size() && is_name_char(src_[e])) ++e;
      push(Tok::kName, src_.substr(p, e - p), p);
      return e;
    }
    if (is_digit(c)) return number(p);
    if (c == '\'' || c == '"') {
      size_t e = p + 1;
      while (e < src_.size() && src_[e] != c) e += src_[e] == '\\' ? 2 : 1;
      if (e >= src_.size()) error(p, "unterminated string literal");
      push(Tok::kString, unescape(std::string_view(src_).substr(p + 1, e - p - 1), line_at(p)), p);
      return e + 1;
    }
    static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                       ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|", ";"};
    for (const char* op : kOps) {
      const size_t n = std::char_traits<char>::length(op);
      if (src_.compare(p, n, op) != 0) continue;
      if (n == 1 && (c == '(' || c == '[' || c == '{')) ++depth;
      if (n == 1 && (c == ')' || c == ']' || c == '}')) {
        if (depth == 0) error(p, std::string("unexpected '") + c + "'");
        --depth;
      }
      push(Tok::kOp, op, p);
      return p + n;
    }
    error(p, std::string("unexpected character '") + c + "'");
  }

  size_t number(size_t p) {
    auto digits = [&](size_t q) {
      while (q < src_.size() && (is_digit(src_[q]) || (src_[q] == '_' && q + 1 < src_.size() && is_digit(src_[q + 1])))) ++q;
      return q;
    };
    size_t e = digits(p);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) {
        e = digits(q);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i)
      if (src_[i] != '_') text += src_[i];
    Token t{is_float ? Tok::kFloat : Tok::kInt, text, 0, 0, line_at(p)};
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) error(p, "integer literal " + text + " does not fit in 64 bits");
    }
    tokens_.push_back(std::move(t));
    return e;
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace revis::jinja
