#include "jinja/python_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>

#include "jinja/error.h"

namespace revis::jinja {
namespace {

// Python's str.isprintable() is false for separators and format/control
// characters; those print as escapes in repr().
bool py_printable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7f) return false;
  if (cp < 0x7f) return true;
  if (cp <= 0xa0 || cp == 0xad || cp == 0x1680 || cp == 0x3000 || cp == 0xfeff) return false;
  if ((cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f)) return false;
  if ((cp >= 0xd800 && cp <= 0xf8ff) || (cp >= 0xfff9 && cp <= 0xfffb) || cp > 0x10ffff) return false;
  return true;
}

void repr_string(std::string& out, const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  for (uint32_t cp : utf8_decode(s)) {
    char buf[16];
    if (cp == '\\' || cp == static_cast<uint32_t>(quote)) {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (py_printable(cp)) {
      utf8_append(out, cp);
    } else {
      std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
      out += buf;
    }
  }
  out += quote;
}

void repr_into(std::string& out, const Value& v, int depth) {
  if (depth > 200) fail("value nested too deeply to print");
  switch (v.type()) {
    case Type::kString: repr_string(out, v.str()); return;
    case Type::kList: {
      if (v.is_iterator()) {
        out += "<generator object>";
        return;
      }
      const bool tuple = v.is_tuple();
      out += tuple ? '(' : '[';
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += ", ";
        repr_into(out, v.items()[i], depth + 1);
      }
      if (tuple && v.items().size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
    case Type::kDict: {
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, k, depth + 1);
        out += ": ";
        repr_into(out, x, depth + 1);
      }
      out += '}';
      return;
    }
    case Type::kNamespace: {
      out += "<Namespace ";
      repr_into(out, Value::dict(v.ns().attrs), depth + 1);
      out += '>';
      return;
    }
    default: out += py_str(v);
  }
}

// One ASCII byte as json.dumps writes it inside a string.
void json_string_ascii(std::string& out, unsigned char c) {
  switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
  }
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  if (ensure_ascii) {
    for (uint32_t cp : utf8_decode(s)) {
      if (cp < 0x80) {
        json_string_ascii(out, static_cast<unsigned char>(cp));
        continue;
      }
      char buf[16];
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
    }
    out += '"';
    return;
  }
  for (unsigned char c : s) json_string_ascii(out, c);
  out += '"';
}

std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return float_repr(f);
}

[[noreturn]] void not_serializable(const Value& v) {
  fail(std::string("Object of type ") + v.type_name() + " is not JSON serializable");
}

std::string json_key(const Value& k) {
  switch (k.type()) {
    case Type::kString: return k.str();
    case Type::kInt: return int_str(k.as_int());
    case Type::kFloat: return json_float(k.as_float());
    case Type::kBool: return k.as_bool() ? "true" : "false";
    case Type::kNone: return "null";
    default: fail(std::string("keys must be str, int, float, bool or None, not ") + k.type_name());
  }
}

struct JsonWriter {
  const JsonOptions& opt;
  std::string item_sep, key_sep;
  std::string out;

  void newline(int level) {
    out += '\n';
    out.append(static_cast<size_t>(opt.indent) * level, ' ');
  }

  void write(const Value& v, int level) {
    if (level > 200) fail("value nested too deeply for tojson");
    switch (v.type()) {
      case Type::kNone: out += "null"; return;
      case Type::kBool: out += v.as_bool() ? "true" : "false"; return;
      case Type::kInt: out += int_str(v.as_int()); return;
      case Type::kFloat: out += json_float(v.as_float()); return;
      case Type::kString: json_string(out, v.str(), opt.ensure_ascii); return;
      case Type::kList: {
        if (v.is_iterator()) not_serializable(v);
        if (v.items().empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < v.items().size(); ++i) {
          if (i) out += item_sep;
          if (opt.indent >= 0) newline(level + 1);
          write(v.items()[i], level + 1);
        }
        if (opt.indent >= 0) newline(level);
        out += ']';
        return;
      }
      case Type::kDict: {
        if (v.dict().items.empty()) {
          out += "{}";
          return;
        }
        std::vector<std::pair<std::string, const Value*>> entries;
        for (const auto& [k, x] : v.dict().items) entries.emplace_back(json_key(k), &x);
        if (opt.sort_keys) {
          for (const auto& [k, x] : v.dict().items)
            if (!k.is_string()) fail("tojson(sort_keys=true) needs string keys");
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_sep;
          if (opt.indent >= 0) newline(level + 1);
          json_string(out, entries[i].first, opt.ensure_ascii);
          out += key_sep;
          write(*entries[i].second, level + 1);
        }
        if (opt.indent >= 0) newline(level);
        out += '}';
        return;
      }
      default: not_serializable(v);
    }
  }
};

}  // namespace

std::string int_str(int64_t i) { return std::to_string(i); }

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci = [-]d[.ddd]e(+|-)XX
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::stoi(sci.substr(e + 1));
  const int decpt = exponent + 1;  // digits d1d2... mean 0.d1d2... * 10^decpt
  std::string out = negative ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits + std::string(decpt - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += ebuf;
  }
  return out;
}

std::string py_str(const Value& v) {
  switch (v.type()) {
    case Type::kUndefined: return "";
    case Type::kNone: return "None";
    case Type::kBool: return v.as_bool() ? "True" : "False";
    case Type::kInt: return int_str(v.as_int());
    case Type::kFloat: return float_repr(v.as_float());
    case Type::kString: return v.str();
    case Type::kFunction: return "<function " + v.fn().name + ">";
    default: {
      std::string out;
      repr_into(out, v, 0);
      return out;
    }
  }
}

std::string py_repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

std::string json_dumps(const Value& v, const JsonOptions& options) {
  JsonWriter w{options, options.item_separator, options.key_separator, {}};
  if (w.item_sep.empty()) w.item_sep = options.indent >= 0 ? "," : ", ";
  if (w.key_sep.empty()) w.key_sep = ": ";
  w.write(v, 0);
  return std::move(w.out);
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

uint32_t py_case(uint32_t cp, bool upper) {
  auto shift = [&](uint32_t lo_first, uint32_t lo_last, uint32_t delta) -> std::optional<uint32_t> {
    if (upper && cp >= lo_first && cp <= lo_last) return cp - delta;
    if (!upper && cp >= lo_first - delta && cp <= lo_last - delta) return cp + delta;
    return std::nullopt;
  };
  if (cp < 0x80) return upper ? (cp >= 'a' && cp <= 'z' ? cp - 32 : cp) : (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
  if (cp == 0xd7 || cp == 0xf7) return cp;
  if (auto r = shift(0xe0, 0xfe, 0x20)) return *r;           // Latin-1
  if (upper && cp == 0xff) return 0x178;
  if (!upper && cp == 0x178) return 0xff;
  if (cp >= 0x100 && cp <= 0x17f && cp != 0x130 && cp != 0x131 && cp != 0x138 && cp != 0x149 && cp != 0x17f) {
    // Latin Extended-A pairs: upper on the even code point, except in
    // 0139-0148 and 0179-017E where the upper one is odd.
    const bool odd_upper = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e);
    const bool is_upper = ((cp & 1) != 0) == odd_upper;
    if (upper && !is_upper) return cp - 1;
    if (!upper && is_upper) return cp + 1;
    return cp;
  }
  if (upper && cp == 0x3c2) return 0x3a3;                    // final sigma
  if (cp != 0x3a2 && cp != 0x3c2)
    if (auto r = shift(0x3b1, 0x3c9, 0x20)) return *r;       // Greek
  if (auto r = shift(0x430, 0x44f, 0x20)) return *r;         // Cyrillic
  if (auto r = shift(0x450, 0x45f, 0x50)) return *r;
  return cp;
}

std::string py_case(std::string_view s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : utf8_decode(s)) {
    if (upper && cp == 0xdf) {
      out += "SS";
      continue;
    }
    utf8_append(out, py_case(cp, upper));
  }
  return out;
}

bool py_cased_letter(uint32_t cp) { return py_case(cp, true) != cp || py_case(cp, false) != cp || cp == 0xdf; }

std::vector<uint32_t> utf8_decode(std::string_view s) {
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int k = 1; ok && k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 2) ok = false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (!ok) {  // a stray byte stands for itself (as U+DC80+byte would in Python)
      cps.push_back(0xdc00 + c);
      i += 1;
      continue;
    }
    cps.push_back(cp);
    i += n;
  }
  return cps;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp >= 0xdc80 && cp <= 0xdcff) {
    out += static_cast<char>(cp - 0xdc00);  // a stray byte, back as it came
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  end = std::min(end, cps.size());
  for (size_t i = begin; i < end; ++i) utf8_append(out, cps[i]);
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  bool ascii = true;
  for (char c : s) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) return s.size();
  n = utf8_decode(s).size();
  return n;
}

bool py_isspace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
         cp == 0x3000;
}

std::string py_strip(std::string_view s, bool left, bool right, const std::string* chars) {
  const std::vector<uint32_t> cps = utf8_decode(s);
  std::vector<uint32_t> set;
  if (chars) set = utf8_decode(*chars);
  auto strip_it = [&](uint32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : py_isspace(cp);
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return utf8_encode(cps, b, e);
}

}  // namespace revis::jinja
