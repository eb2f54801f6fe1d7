#include "jinja/str_methods.h"

#include <algorithm>

#include "jinja/builtin_args.h"
#include "jinja/builtins.h"
#include "jinja/error.h"
#include "jinja/python_text.h"

namespace revis::jinja {
namespace {

// Letters as str.isalpha() sees them, roughly: cased letters, and above the
// Latin blocks anything but punctuation and symbols (CJK counts as letters).
bool is_alpha(uint32_t cp) {
  if (cp < 0x250) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || py_cased_letter(cp);
  return !(cp >= 0x2000 && cp <= 0x2bff) && !(cp >= 0x3000 && cp <= 0x303f) && !(cp >= 0xff00 && cp <= 0xff0f);
}

// Python's str.title(): a letter after a non-letter goes upper, the rest lower.
std::string py_title(const std::string& s) {
  std::string out;
  bool prev_letter = false;
  for (uint32_t cp : utf8_decode(s)) {
    const bool letter = is_alpha(cp);
    if (letter) cp = py_case(cp, !prev_letter);
    prev_letter = letter;
    utf8_append(out, cp);
  }
  return out;
}

std::vector<std::string> py_split(const std::string& s, const Value& sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep.is_none() || sep.is_undefined()) {
    const std::vector<uint32_t> cps = utf8_decode(s);
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && py_isspace(cps[i])) ++i;
      if (i == cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > i && py_isspace(cps[e - 1])) --e;
        parts.push_back(utf8_encode(cps, i, e));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !py_isspace(cps[j])) ++j;
      parts.push_back(utf8_encode(cps, i, j));
      i = j;
    }
    return parts;
  }
  const std::string d = need_str(sep, "split");
  if (d.empty()) fail("empty separator");
  size_t pos = 0;
  for (;;) {
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
    const size_t at = s.find(d, pos);
    if (at == std::string::npos) break;
    parts.push_back(s.substr(pos, at - pos));
    pos = at + d.size();
  }
  parts.push_back(s.substr(pos));
  return parts;
}

std::vector<std::string> py_rsplit(const std::string& s, const Value& sep, int64_t maxsplit) {
  if (maxsplit < 0 || sep.is_none() || sep.is_undefined()) {
    if (maxsplit < 0) return py_split(s, sep, -1);
    // Whitespace rsplit with a limit: split from the right.
    const std::vector<uint32_t> cps = utf8_decode(s);
    std::vector<std::string> parts;
    size_t e = cps.size();
    while (e > 0) {
      while (e > 0 && py_isspace(cps[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t b = 0;
        while (b < e && py_isspace(cps[b])) ++b;
        parts.push_back(utf8_encode(cps, b, e));
        break;
      }
      size_t b = e;
      while (b > 0 && !py_isspace(cps[b - 1])) --b;
      parts.push_back(utf8_encode(cps, b, e));
      e = b;
    }
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  const std::string d = need_str(sep, "rsplit");
  if (d.empty()) fail("empty separator");
  std::vector<std::string> parts;
  size_t end = s.size();
  while (static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < d.size()) break;
    const size_t at = s.rfind(d, end - d.size());
    if (at == std::string::npos) break;
    parts.push_back(s.substr(at + d.size(), end - at - d.size()));
    end = at;
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

Value string_list(const std::vector<std::string>& parts, bool markup) {
  ValueList items;
  for (const std::string& p : parts) items.push_back(Value::string(p, markup));
  return Value::list(std::move(items));
}

size_t cp_index(const std::string& s, size_t byte_pos) { return utf8_length(std::string_view(s).substr(0, byte_pos)); }

// str.format: {} {0} {name} {0.attr} {0[key]} with !r / !s; no format specs.
std::string py_format(Interpreter& in, const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 0;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      if (colon + 1 < field.size()) fail("format specifications in str.format are not supported");
      field.resize(colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    size_t name_end = std::min(field.find('.'), field.find('['));
    std::string head = field.substr(0, name_end);
    Value v;
    if (head.empty()) {
      if (auto_index >= args.positional.size()) fail("Replacement index " + std::to_string(auto_index) + " out of range");
      v = args.positional[auto_index++];
    } else if (std::all_of(head.begin(), head.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t k = std::stoul(head);
      if (k >= args.positional.size()) fail("Replacement index " + head + " out of range");
      v = args.positional[k];
    } else {
      const Value* named = args.get(SIZE_MAX, head);
      if (!named) fail("KeyError: '" + head + "'");
      v = *named;
    }
    for (size_t p = name_end; p < field.size();) {
      if (field[p] == '.') {
        size_t q = p + 1;
        while (q < field.size() && field[q] != '.' && field[q] != '[') ++q;
        v = get_attr(v, field.substr(p + 1, q - p - 1));
        p = q;
      } else {
        const size_t q = field.find(']', p);
        if (q == std::string::npos) fail("Missing ']' in format string");
        const std::string key = field.substr(p + 1, q - p - 1);
        const bool digits = !key.empty() && std::all_of(key.begin(), key.end(), [](char d) { return d >= '0' && d <= '9'; });
        v = get_item(v, digits ? Value::integer(std::stoll(key)) : Value::string(key));
        p = q + 1;
      }
    }
    out += conversion == 'r' ? py_repr(v) : py_str(v);
    in.check_string(out.size());
  }
  return out;
}

}  // namespace

bool is_word(uint32_t cp) { return is_alpha(cp) || (cp >= '0' && cp <= '9') || cp == '_'; }

bool has_only_case(const std::string& s, bool upper) {
  bool cased = false;
  for (uint32_t cp : utf8_decode(s)) {
    if (!py_cased_letter(cp)) continue;
    if (py_case(cp, upper) != cp) return false;
    cased = true;
  }
  return cased;
}

std::string capitalize(const std::string& s) {
  std::vector<uint32_t> cps = utf8_decode(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (i == 0 && cps[i] == 0xdf) {
      out += "Ss";
      continue;
    }
    utf8_append(out, py_case(cps[i], i == 0));
  }
  return out;
}

std::string jinja_title(const std::string& s) {
  std::string out;
  bool start = true;
  for (uint32_t cp : utf8_decode(s)) {
    const bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || py_isspace(cp);
    if (!sep) cp = py_case(cp, start);
    start = sep;
    utf8_append(out, cp);
  }
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count,
                       Interpreter& in) {
  std::string out;
  if (old.empty()) {
    const std::vector<uint32_t> cps = utf8_decode(s);
    int64_t n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += rep;
        ++n;
      }
      if (i < cps.size()) utf8_append(out, cps[i]);
      in.check_string(out.size());
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  for (;;) {
    const size_t at = count >= 0 && n >= count ? std::string::npos : s.find(old, pos);
    if (at == std::string::npos) break;
    out.append(s, pos, at - pos);
    out += rep;
    in.check_string(out.size());
    pos = at + old.size();
    ++n;
  }
  out.append(s, pos);
  return out;
}

std::vector<std::string> py_splitlines(const std::string& s, bool keepends) {
  std::vector<std::string> lines;
  const std::vector<uint32_t> cps = utf8_decode(s);
  size_t b = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const uint32_t c = cps[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    size_t e = i + 1;
    if (c == '\r' && e < cps.size() && cps[e] == '\n') e++;
    lines.push_back(utf8_encode(cps, b, keepends ? e : i));
    b = e;
    i = e - 1;
  }
  if (b < cps.size()) lines.push_back(utf8_encode(cps, b, cps.size()));
  return lines;
}

Value string_method(const Value& self, const std::string& name) {
  const std::string& s = self.str();
  const bool m = self.is_markup();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return method(name, [self, l, r](Interpreter&, CallArgs& a) {
      const Value chars = a.get_or(0, "chars", Value::none());
      if (chars.is_none()) return like(self, py_strip(self.str(), l, r));
      const std::string set = need_str(chars, "strip");
      return like(self, py_strip(self.str(), l, r, &set));
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool right = name == "rsplit";
    return method(name, [s, m, right](Interpreter&, CallArgs& a) {
      const Value sep = a.get_or(0, "sep", Value::none());
      const int64_t maxsplit = need_int(a.get_or(1, "maxsplit", Value::integer(-1)), "maxsplit");
      return string_list(right ? py_rsplit(s, sep, maxsplit) : py_split(s, sep, maxsplit), m);
    });
  }
  if (name == "splitlines") {
    return method(name, [s, m](Interpreter&, CallArgs& a) {
      return string_list(py_splitlines(s, a.get_or(0, "keepends", Value::boolean(false)).truthy()), m);
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool start = name == "startswith";
    return method(name, [s, start](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) fail("startswith/endswith takes a prefix");
      const Value& arg = a.positional[0];
      ValueList options = arg.is_tuple() ? arg.items() : ValueList{arg};
      for (const Value& o : options) {
        const std::string p = need_str(o, start ? "startswith" : "endswith");
        if (p.size() <= s.size() && (start ? s.compare(0, p.size(), p) : s.compare(s.size() - p.size(), p.size(), p)) == 0)
          return Value::boolean(true);
      }
      return Value::boolean(false);
    });
  }
  if (name == "replace") {
    return method(name, [self](Interpreter& in, CallArgs& a) {
      if (a.positional.size() < 2) fail("replace takes old and new");
      const int64_t count = need_int(a.get_or(2, "count", Value::integer(-1)), "count");
      return like(self, py_replace(self.str(), need_str(a.positional[0], "replace"), need_str(a.positional[1], "replace"),
                                   count, in));
    });
  }
  if (name == "upper" || name == "lower")
    return method(name, [self, up = name == "upper"](Interpreter&, CallArgs&) { return like(self, py_case(self.str(), up)); });
  if (name == "title") return method(name, [self](Interpreter&, CallArgs&) { return like(self, py_title(self.str())); });
  if (name == "capitalize") return method(name, [self](Interpreter&, CallArgs&) { return like(self, capitalize(self.str())); });
  if (name == "format") {
    return method(name, [self](Interpreter& in, CallArgs& a) {
      if (!self.is_markup()) return Value::string(py_format(in, self.str(), a));
      CallArgs escaped = a;  // Markup.format escapes its arguments
      for (Value& v : escaped.positional)
        if (!v.is_markup()) v = Value::string(html_escape(py_str(v)), true);
      for (auto& [k, v] : escaped.named)
        if (!v.is_markup()) v = Value::string(html_escape(py_str(v)), true);
      return Value::string(py_format(in, self.str(), escaped), true);
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return method(name, [s, name](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) fail(name + " takes a substring");
      const std::string sub = need_str(a.positional[0], name.c_str());
      if (name == "count") {
        if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s) + 1));
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value::integer(n);
      }
      const size_t at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
      if (at == std::string::npos) {
        if (name == "index" || name == "rindex") fail("substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(cp_index(s, at)));
    });
  }
  if (name == "join") {
    return method(name, [self](Interpreter& in, CallArgs& a) {
      if (a.positional.empty()) fail("join takes an iterable");
      std::string out;
      bool first = true;
      for (const Value& v : iterate(in, a.positional[0])) {
        if (!first) out += self.str();
        first = false;
        out += self.is_markup() && !v.is_markup() ? html_escape(need_str(v, "join")) : need_str(v, "join");
        in.check_string(out.size());
      }
      return like(self, out);
    });
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const bool prefix = name == "removeprefix";
    return method(name, [self, prefix](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) fail("removeprefix/removesuffix takes an argument");
      const std::string& str = self.str();
      const std::string p = need_str(a.positional[0], "removeprefix");
      if (p.size() <= str.size() && prefix && str.compare(0, p.size(), p) == 0) return like(self, str.substr(p.size()));
      if (p.size() <= str.size() && !prefix && str.compare(str.size() - p.size(), p.size(), p) == 0)
        return like(self, str.substr(0, str.size() - p.size()));
      return self;
    });
  }
  static const char* const kPredicates[] = {"isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper"};
  for (const char* p : kPredicates) {
    if (name != p) continue;
    return method(name, [s, name](Interpreter&, CallArgs&) {
      const std::vector<uint32_t> cps = utf8_decode(s);
      if (cps.empty()) return Value::boolean(false);
      if (name == "islower" || name == "isupper") return Value::boolean(has_only_case(s, name == "isupper"));
      for (uint32_t c : cps) {
        const bool digit = c >= '0' && c <= '9';
        const bool ok = name == "isdigit" ? digit : name == "isalpha" ? is_alpha(c) : name == "isalnum" ? digit || is_alpha(c) : py_isspace(c);
        if (!ok) return Value::boolean(false);
      }
      return Value::boolean(true);
    });
  }
  return Value();
}

}  // namespace revis::jinja
