#include "jinja/builtins.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <utility>

#include "jinja/error.h"
#include "jinja/python_text.h"

namespace revis::jinja {
namespace {

using Builtin = std::function<Value(Interpreter&, const Value&, CallArgs&)>;

[[noreturn]] void type_error(const std::string& what) { fail(what); }

std::string need_str(const Value& v, const char* what) {
  if (v.is_undefined()) fail(v.undefined_reason());
  if (!v.is_string()) type_error(std::string(what) + " expects a string, not '" + v.type_name() + "'");
  return v.str();
}

int64_t need_int(const Value& v, const char* what) {
  if (v.is_undefined()) fail(v.undefined_reason());
  if (!v.is_int() && !v.is_bool()) type_error(std::string(what) + " expects an integer, not '" + v.type_name() + "'");
  return v.as_int();
}

// A string result that keeps Markup when its source was Markup, as
// markupsafe's str methods do.
Value like(const Value& self, std::string s) { return Value::string(std::move(s), self.is_markup()); }

// Letters as str.isalpha() sees them, roughly: cased letters, and above the
// Latin blocks anything but punctuation and symbols (CJK counts as letters).
bool is_alpha(uint32_t cp) {
  if (cp < 0x250) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || py_cased_letter(cp);
  return !(cp >= 0x2000 && cp <= 0x2bff) && !(cp >= 0x3000 && cp <= 0x303f) && !(cp >= 0xff00 && cp <= 0xff0f);
}
bool is_word(uint32_t cp) { return is_alpha(cp) || (cp >= '0' && cp <= '9') || cp == '_'; }

// str.islower() / str.isupper(): some cased letter, and none of the other case.
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

// jinja2's |title: words begin after runs of '-', whitespace, '(', '{', '[' or '<'.
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

Value unsafe_method(const std::string& type, const std::string& name) {
  return Value::function(name, [type, name](Interpreter&, CallArgs&) -> Value {
    fail("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
  });
}

Value method(const std::string& name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  return Value::function(name, std::move(fn));
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

Value items_of(const Dict& d) {
  ValueList out;
  for (const auto& [k, v] : d.items) out.push_back(Value::tuple({k, v}));
  return Value::list(std::move(out));
}

Value dict_method(const Value& self, const std::string& name) {
  if (name == "get") {
    return method(name, [self](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) fail("get takes a key");
      const Value* v = self.dict().find(a.positional[0]);
      return v ? *v : a.get_or(1, "default", Value::none());
    });
  }
  if (name == "items") return method(name, [self](Interpreter&, CallArgs&) { return items_of(self.dict()); });
  if (name == "keys" || name == "values") {
    return method(name, [self, keys = name == "keys"](Interpreter&, CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : self.dict().items) out.push_back(keys ? k : v);
      return Value::list(std::move(out));
    });
  }
  if (name == "copy") return method(name, [self](Interpreter&, CallArgs&) { return Value::dict(self.dict()); });
  static const char* const kUnsafe[] = {"pop", "popitem", "update", "setdefault", "clear"};
  for (const char* u : kUnsafe)
    if (name == u) return unsafe_method("dict", name);
  return Value();
}

Value list_method(const Value& self, const std::string& name) {
  if (name == "index" || name == "count") {
    return method(name, [self, name](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) fail(name + " takes a value");
      int64_t n = 0;
      for (size_t i = 0; i < self.items().size(); ++i) {
        if (!py_equal(self.items()[i], a.positional[0])) continue;
        if (name == "index") return Value::integer(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") fail("value is not in list");
      return Value::integer(n);
    });
  }
  static const char* const kUnsafe[] = {"append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear"};
  for (const char* u : kUnsafe)
    if (name == u) return unsafe_method(self.is_tuple() ? "tuple" : "list", name);
  return Value();
}

Value no_attribute(const Value& obj, const std::string& name) {
  std::string why = "'";
  why += obj.type_name();
  why += " object' has no attribute '" + name + "'";
  return Value::undefined(std::move(why));
}

int64_t normalize_index(int64_t i, size_t size) { return i < 0 ? i + static_cast<int64_t>(size) : i; }

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail(obj.undefined_reason());
  Value m;
  switch (obj.type()) {
    case Type::kString: m = string_method(obj, name); break;
    case Type::kDict:
      m = dict_method(obj, name);
      if (m.is_undefined()) {
        if (const Value* v = obj.dict().find(name)) return *v;
      }
      break;
    case Type::kList: m = list_method(obj, name); break;
    case Type::kNamespace:
      if (const Value* v = obj.ns().attrs.find(name)) return *v;
      break;
    default: break;
  }
  return m.is_undefined() ? no_attribute(obj, name) : m;
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail(obj.undefined_reason());
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if (((obj.is_list() && !obj.is_iterator()) || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_list()) {
      const int64_t i = normalize_index(key.as_int(), obj.items().size());
      if (i >= 0 && i < static_cast<int64_t>(obj.items().size())) return obj.items()[static_cast<size_t>(i)];
    } else {
      const std::vector<uint32_t> cps = utf8_decode(obj.str());
      const int64_t i = normalize_index(key.as_int(), cps.size());
      if (i >= 0 && i < static_cast<int64_t>(cps.size())) return like(obj, utf8_encode(cps, i, i + 1));
    }
    return Value::undefined(std::string("'") + obj.type_name() + " object' has no element " + py_str(key));
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined(std::string("'") + obj.type_name() + " object' has no element " + py_repr(key));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail(obj.undefined_reason());
  auto bound = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    return need_int(v, what);
  };
  const std::optional<int64_t> b = bound(start, "slice"), e = bound(stop, "slice"), st = bound(step, "slice");
  const int64_t s = st.value_or(1);
  if (s == 0) fail("slice step cannot be zero");
  if (obj.is_dict()) fail("unhashable type: 'slice'");
  std::vector<uint32_t> cps;
  size_t len;
  if (obj.is_list() && !obj.is_iterator()) {
    len = obj.items().size();
  } else if (obj.is_string()) {
    cps = utf8_decode(obj.str());
    len = cps.size();
  } else {
    return Value::undefined(std::string("'") + obj.type_name() + "' object is not subscriptable");
  }
  const int64_t n = static_cast<int64_t>(len);
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = s < 0 ? -1 : 0;
    } else if (x >= n) {
      x = s < 0 ? n - 1 : n;
    }
    return x;
  };
  const int64_t from = adjust(b, s > 0 ? 0 : n - 1), to = adjust(e, s > 0 ? n : -1);
  std::vector<size_t> picks;
  for (int64_t i = from; s > 0 ? i < to : i > to; i += s) picks.push_back(static_cast<size_t>(i));
  if (obj.is_list()) {
    ValueList out;
    for (size_t i : picks) out.push_back(obj.items()[i]);
    return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  std::string out;
  for (size_t i : picks) utf8_append(out, cps[i]);
  return like(obj, out);
}

ValueList iterate(Interpreter& in, const Value& v) {
  switch (v.type()) {
    case Type::kUndefined: return {};
    case Type::kList: return v.items();
    case Type::kDict: {
      ValueList keys;
      for (const auto& [k, x] : v.dict().items) keys.push_back(k);
      return keys;
    }
    case Type::kString: {
      ValueList chars;
      for (uint32_t cp : utf8_decode(v.str())) {
        std::string c;
        utf8_append(c, cp);
        chars.push_back(Value::string(std::move(c), v.is_markup()));
      }
      return chars;
    }
    default: fail(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Type::kUndefined: return false;
    case Type::kString:
      if (!item.is_string())
        fail(std::string("'in <string>' requires string as left operand, not ") + item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Type::kList:
      return std::any_of(container.items().begin(), container.items().end(),
                         [&](const Value& x) { return py_equal(x, item); });
    case Type::kDict: return container.dict().find(item) != nullptr;
    default: fail(std::string("argument of type '") + container.type_name() + "' is not iterable");
  }
}

Value negate(const Value& v) {
  if (v.is_float()) return Value::number(-v.as_float());
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) fail("integer overflow");
    return Value::integer(-v.as_int());
  }
  fail(std::string("bad operand type for unary -: '") + v.type_name() + "'");
}

Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail(a.undefined_reason());
  if (b.is_undefined()) fail(b.undefined_reason());
  auto unsupported = [&]() -> Value {
    fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  const bool numbers = a.is_number() && b.is_number();
  const bool ints = numbers && !a.is_float() && !b.is_float();
  int64_t r;
  if (op == "+") {
    if (ints) {
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.to_double() + b.to_double());
    if (a.is_string() && b.is_string()) {
      in.check_string(a.str().size() + b.str().size());
      if (!a.is_markup() && !b.is_markup()) return Value::string(a.str() + b.str());
      const std::string x = a.is_markup() ? a.str() : html_escape(a.str());
      const std::string y = b.is_markup() ? b.str() : html_escape(b.str());
      in.check_string(x.size() + y.size());
      return Value::string(x + y, true);
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_iterator() && !b.is_iterator()) {
      in.check_items(a.items().size() + b.items().size());
      ValueList out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
    if (a.is_string()) fail(std::string("can only concatenate str (not \"") + b.type_name() + "\") to str");
    return unsupported();
  }
  if (op == "-") {
    if (ints) {
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.to_double() - b.to_double());
    return unsupported();
  }
  if (op == "*") {
    if (ints) {
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.to_double() * b.to_double());
    const Value* seq = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
    const Value* count = seq == &a ? &b : &a;
    if (!seq || seq->is_iterator() || !(count->is_int() || count->is_bool())) return unsupported();
    const int64_t n = std::max<int64_t>(count->as_int(), 0);
    if (seq->is_string()) {
      if (n > 0) in.check_string(seq->str().size() * static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)));
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += seq->str();
      return like(*seq, out);
    }
    if (n > 0) in.check_items(seq->items().size() * static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)));
    ValueList out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->items().begin(), seq->items().end());
    return seq->is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  if (!numbers) {
    if (op == "%" && a.is_string()) fail("printf-style '%' string formatting is not supported");
    return unsupported();
  }
  if (op == "/") {
    if (b.to_double() == 0) fail("division by zero");
    return Value::number(a.to_double() / b.to_double());
  }
  if (op == "//" || op == "%") {
    if (b.to_double() == 0) fail(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (x == INT64_MIN && y == -1) fail("integer overflow");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
    const double x = a.to_double(), y = b.to_double();
    if (op == "//") return Value::number(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::number(m);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t result = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; --e) {
        if (__builtin_mul_overflow(result, base, &result)) fail("integer overflow");
        if (result == 0 || result == 1) break;
      }
      return Value::integer(result);
    }
    return Value::number(std::pow(a.to_double(), b.to_double()));
  }
  return unsupported();
}

// --- filters --------------------------------------------------------------

namespace {

// jinja2's attribute getter for filters: "a.b.0" looks up item by item.
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t p = 0;
  for (;;) {
    const size_t dot = path.find('.', p);
    const std::string part = path.substr(p, dot == std::string::npos ? std::string::npos : dot - p);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = get_item(cur, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return cur;
    p = dot + 1;
  }
}

// Sorting key of jinja2's case-insensitive filters: strings compare lowercased.
Value fold_case(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(py_case(v.str(), false)) : v;
}

int64_t py_len(const Value& v) {
  switch (v.type()) {
    case Type::kUndefined: return 0;
    case Type::kString: return static_cast<int64_t>(utf8_length(v.str()));
    case Type::kList:
      if (v.is_iterator()) break;
      return static_cast<int64_t>(v.items().size());
    case Type::kDict: return static_cast<int64_t>(v.dict().items.size());
    default: break;
  }
  fail(std::string("object of type '") + v.type_name() + "' has no len()");
}

// The text of a number as Python's int() and float() accept it: surrounding
// whitespace and digit-group underscores dropped; empty when nothing is left.
std::string numeric_text(const std::string& text) {
  std::string clean;
  for (char c : py_strip(text, true, true))
    if (c != '_') clean += c;
  return clean;
}

// Python's int() / float() of a string; nullopt when it is not a number.
std::optional<double> parse_float(const std::string& text) {
  const std::string clean = numeric_text(text);
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (clean.empty() || end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

std::optional<int64_t> parse_int(const std::string& text, int base) {
  const std::string clean = numeric_text(text);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(clean.c_str(), &end, base);
  if (clean.empty() || end != clean.c_str() + clean.size() || errno == ERANGE) return std::nullopt;
  return v;
}

std::string indent_text(const std::string& text, const std::string& pad, bool first, bool blank) {
  const std::vector<std::string> lines = py_splitlines(text + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    if ((i > 0 || first) && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  return out;
}

ValueList filter_items(Interpreter& in, const Value& input, CallArgs& args, bool by_attr, bool keep) {
  ValueList out;
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty()) fail("selectattr/rejectattr needs an attribute");
    attr = need_str(args.positional[next++], "selectattr");
  }
  const bool has_test = next < args.positional.size();
  const std::string test = has_test ? need_str(args.positional[next++], "select") : "";
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<ptrdiff_t>(next), args.positional.end());
  test_args.named = args.named;
  if (!input.truthy()) return out;  // jinja2 selects from a falsy value (None) as from nothing
  for (const Value& item : iterate(in, input)) {
    in.step();
    const Value v = by_attr ? attr_path(item, attr) : item;
    const bool pass = has_test ? apply_test(in, test, v, test_args) : v.truthy();
    if (pass == keep) out.push_back(item);
  }
  return out;
}

ValueList sorted(Interpreter& in, ValueList items, bool reverse, bool case_sensitive, const Value& attribute) {
  auto key = [&](const Value& v) {
    return fold_case(attribute.is_none() || attribute.is_undefined() ? v : attr_path(v, py_str(attribute)), case_sensitive);
  };
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) keyed.emplace_back(key(v), std::move(v));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    in.step();
    return reverse ? py_less(y.first, x.first) : py_less(x.first, y.first);
  });
  ValueList out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

const std::unordered_map<std::string, Builtin>& filters() {
  static const std::unordered_map<std::string, Builtin> table = [] {
    std::unordered_map<std::string, Builtin> f;
    f["default"] = [](Interpreter&, const Value& v, CallArgs& a) {
      const bool boolean = a.get_or(1, "boolean", Value::boolean(false)).truthy();
      if (v.is_undefined() || (boolean && !v.truthy())) return a.get_or(0, "default_value", Value::string(""));
      return v;
    };
    f["d"] = f["default"];
    f["length"] = [](Interpreter&, const Value& v, CallArgs&) { return Value::integer(py_len(v)); };
    f["count"] = f["length"];
    f["string"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() ? v : Value::string(py_str(v)); };
    f["trim"] = [](Interpreter&, const Value& v, CallArgs& a) {
      const Value chars = a.get_or(0, "chars", Value::none());
      const std::string set = chars.is_none() ? "" : need_str(chars, "trim");
      return like(v, py_strip(py_str(v), true, true, chars.is_none() ? nullptr : &set));
    };
    f["upper"] = [](Interpreter&, const Value& v, CallArgs&) { return like(v, py_case(py_str(v), true)); };
    f["lower"] = [](Interpreter&, const Value& v, CallArgs&) { return like(v, py_case(py_str(v), false)); };
    f["capitalize"] = [](Interpreter&, const Value& v, CallArgs&) { return like(v, capitalize(py_str(v))); };
    f["title"] = [](Interpreter&, const Value& v, CallArgs&) { return like(v, jinja_title(py_str(v))); };
    f["replace"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      if (a.positional.size() < 2) fail("replace takes old and new");
      const int64_t count = a.get(2, "count") ? need_int(*a.get(2, "count"), "count") : -1;
      return like(v, py_replace(py_str(v), py_str(a.positional[0]), py_str(a.positional[1]), count, in));
    };
    f["safe"] = [](Interpreter&, const Value& v, CallArgs&) { return Value::string(py_str(v), true); };
    f["escape"] = [](Interpreter&, const Value& v, CallArgs&) {
      return v.is_markup() ? v : Value::string(html_escape(py_str(v)), true);
    };
    f["e"] = f["escape"];
    f["forceescape"] = [](Interpreter&, const Value& v, CallArgs&) { return Value::string(html_escape(py_str(v)), true); };
    f["pprint"] = [](Interpreter&, const Value& v, CallArgs&) { return Value::string(py_repr(v)); };
    f["list"] = [](Interpreter& in, const Value& v, CallArgs&) { return Value::list(iterate(in, v)); };
    f["first"] = [](Interpreter& in, const Value& v, CallArgs&) {
      ValueList items = iterate(in, v);
      return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
    };
    f["last"] = [](Interpreter& in, const Value& v, CallArgs&) {
      if (v.is_iterator()) fail("'generator' object is not reversible");
      ValueList items = iterate(in, v);
      return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
    };
    f["reverse"] = [](Interpreter& in, const Value& v, CallArgs&) {
      if (v.is_string()) {
        std::vector<uint32_t> cps = utf8_decode(v.str());
        std::reverse(cps.begin(), cps.end());
        return like(v, utf8_encode(cps));
      }
      ValueList items = iterate(in, v);
      std::reverse(items.begin(), items.end());
      // reversed() of a sequence is an iterator; of an iterator, a list
      return v.is_iterator() ? Value::list(std::move(items)) : Value::iterator(std::move(items));
    };
    f["join"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      const std::string sep = py_str(a.get_or(0, "d", Value::string("")));
      const Value attribute = a.get_or(1, "attribute", Value::none());
      std::string out;
      bool first = true;
      for (const Value& item : iterate(in, v)) {
        if (!first) out += sep;
        first = false;
        out += py_str(attribute.is_none() ? item : attr_path(item, py_str(attribute)));
        in.check_string(out.size());
      }
      return Value::string(out);
    };
    f["items"] = [](Interpreter&, const Value& v, CallArgs&) {
      if (v.is_undefined()) return Value::iterator({});
      if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
      return Value::iterator(items_of(v.dict()).items());
    };
    f["dictsort"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      if (!v.is_dict()) fail("dictsort expects a mapping");
      const bool case_sensitive = a.get_or(0, "case_sensitive", Value::boolean(false)).truthy();
      const std::string by = py_str(a.get_or(1, "by", Value::string("key")));
      const bool reverse = a.get_or(2, "reverse", Value::boolean(false)).truthy();
      if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
      ValueList pairs = items_of(v.dict()).items();
      return Value::list(sorted(in, std::move(pairs), reverse, case_sensitive, Value::string(by == "key" ? "0" : "1")));
    };
    f["sort"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      return Value::list(sorted(in, iterate(in, v), a.get_or(0, "reverse", Value::boolean(false)).truthy(),
                                a.get_or(1, "case_sensitive", Value::boolean(false)).truthy(),
                                a.get_or(2, "attribute", Value::none())));
    };
    f["unique"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      const bool case_sensitive = a.get_or(0, "case_sensitive", Value::boolean(false)).truthy();
      const Value attribute = a.get_or(1, "attribute", Value::none());
      ValueList out, seen;
      for (const Value& item : iterate(in, v)) {
        in.step();
        const Value key = fold_case(attribute.is_none() ? item : attr_path(item, py_str(attribute)), case_sensitive);
        if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, key); })) continue;
        seen.push_back(key);
        out.push_back(item);
      }
      return Value::iterator(std::move(out));
    };
    f["map"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      ValueList out;
      if (!v.truthy()) return Value::iterator({});  // as jinja2: mapping over None gives nothing
      if (const Value* attribute = a.get(SIZE_MAX, "attribute")) {
        const Value* dflt = a.get(SIZE_MAX, "default");
        for (const Value& item : iterate(in, v)) {
          Value x = attr_path(item, py_str(*attribute));
          out.push_back(x.is_undefined() && dflt ? *dflt : x);
        }
        return Value::iterator(std::move(out));
      }
      if (a.positional.empty()) fail("map needs a filter name or attribute=");
      const std::string name = need_str(a.positional[0], "map");
      CallArgs rest;
      rest.positional.assign(a.positional.begin() + 1, a.positional.end());
      rest.named = a.named;
      for (const Value& item : iterate(in, v)) {
        CallArgs each = rest;
        out.push_back(apply_filter(in, name, item, each));
      }
      return Value::iterator(std::move(out));
    };
    f["select"] = [](Interpreter& in, const Value& v, CallArgs& a) { return Value::iterator(filter_items(in, v, a, false, true)); };
    f["reject"] = [](Interpreter& in, const Value& v, CallArgs& a) { return Value::iterator(filter_items(in, v, a, false, false)); };
    f["selectattr"] = [](Interpreter& in, const Value& v, CallArgs& a) { return Value::iterator(filter_items(in, v, a, true, true)); };
    f["rejectattr"] = [](Interpreter& in, const Value& v, CallArgs& a) { return Value::iterator(filter_items(in, v, a, true, false)); };
    f["tojson"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      // Hugging Face's tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
      JsonOptions opt;
      opt.ensure_ascii = a.get_or(0, "ensure_ascii", Value::boolean(false)).truthy();
      const Value indent = a.get_or(1, "indent", Value::none());
      if (!indent.is_none()) opt.indent = static_cast<int>(std::clamp<int64_t>(need_int(indent, "tojson indent"), 0, 64));
      const Value separators = a.get_or(2, "separators", Value::none());
      if (!separators.is_none()) {
        if (!separators.is_list() || separators.items().size() != 2) fail("tojson separators must be a pair of strings");
        opt.item_separator = need_str(separators.items()[0], "separators");
        opt.key_separator = need_str(separators.items()[1], "separators");
      }
      opt.sort_keys = a.get_or(3, "sort_keys", Value::boolean(false)).truthy();
      std::string out = json_dumps(v, opt);
      in.check_string(out.size());
      return Value::string(std::move(out));
    };
    f["indent"] = [](Interpreter&, const Value& v, CallArgs& a) {
      const Value width = a.get_or(0, "width", Value::integer(4));
      const std::string pad = width.is_string() ? width.str()
                                                : std::string(static_cast<size_t>(std::clamp<int64_t>(need_int(width, "indent"), 0, 256)), ' ');
      return like(v, indent_text(need_str(v, "indent"), pad, a.get_or(1, "first", Value::boolean(false)).truthy(),
                                 a.get_or(2, "blank", Value::boolean(false)).truthy()));
    };
    f["int"] = [](Interpreter&, const Value& v, CallArgs& a) {
      const Value dflt = a.get_or(0, "default", Value::integer(0));
      if (v.is_undefined()) fail(v.undefined_reason());
      if (v.is_int()) return v;
      if (v.is_bool()) return Value::integer(v.as_int());
      if (v.is_float()) {
        if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) >= 9.2e18) return dflt;
        return Value::integer(static_cast<int64_t>(v.as_float()));
      }
      if (v.is_string()) {
        if (auto i = parse_int(v.str(), static_cast<int>(need_int(a.get_or(1, "base", Value::integer(10)), "base"))))
          return Value::integer(*i);
        if (auto d = parse_float(v.str()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18)
          return Value::integer(static_cast<int64_t>(*d));
      }
      return dflt;
    };
    f["float"] = [](Interpreter&, const Value& v, CallArgs& a) {
      if (v.is_undefined()) fail(v.undefined_reason());
      if (v.is_number()) return Value::number(v.to_double());
      if (v.is_string())
        if (auto d = parse_float(v.str())) return Value::number(*d);
      return a.get_or(0, "default", Value::number(0.0));
    };
    f["abs"] = [](Interpreter&, const Value& v, CallArgs&) {
      if (v.is_float()) return Value::number(std::fabs(v.as_float()));
      const int64_t i = need_int(v, "abs");
      if (i == INT64_MIN) fail("integer overflow");
      return Value::integer(i < 0 ? -i : i);
    };
    f["round"] = [](Interpreter&, const Value& v, CallArgs& a) {
      if (!v.is_number()) fail("round expects a number");
      if (!v.is_float() && py_str(a.get_or(1, "method", Value::string("common"))) == "common")
        return Value::integer(v.as_int());  // Python's round() of an int is that int
      const int64_t precision = std::clamp<int64_t>(need_int(a.get_or(0, "precision", Value::integer(0)), "round"), -20, 20);
      const std::string method = py_str(a.get_or(1, "method", Value::string("common")));
      const double scale = std::pow(10.0, static_cast<double>(precision));
      const double x = v.to_double() * scale;
      const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
      return Value::number(r / scale);
    };
    f["wordcount"] = [](Interpreter&, const Value& v, CallArgs&) {
      int64_t n = 0;
      bool in_word = false;
      for (uint32_t cp : utf8_decode(py_str(v))) {
        const bool w = is_word(cp);
        if (w && !in_word) ++n;
        in_word = w;
      }
      return Value::integer(n);
    };
    f["center"] = [](Interpreter&, const Value& v, CallArgs& a) {
      const std::string s = py_str(v);
      const int64_t width = std::min<int64_t>(need_int(a.get_or(0, "width", Value::integer(80)), "center"), 1 << 16);
      const int64_t len = static_cast<int64_t>(utf8_length(s));
      if (width <= len) return like(v, s);
      const int64_t total = width - len, left = total / 2 + (total & width & 1);
      return like(v, std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' '));
    };
    f["batch"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      const int64_t n = need_int(a.get_or(0, "linecount", Value::integer(1)), "batch");
      if (n <= 0) fail("batch size must be positive");
      const Value* fill = a.get(1, "fill_with");
      ValueList out, row;
      for (const Value& item : iterate(in, v)) {
        row.push_back(item);
        if (static_cast<int64_t>(row.size()) == n) out.push_back(Value::list(std::exchange(row, {})));
      }
      if (!row.empty()) {
        if (fill && !fill->is_none())
          while (static_cast<int64_t>(row.size()) < n) row.push_back(*fill);
        out.push_back(Value::list(std::move(row)));
      }
      return Value::iterator(std::move(out));
    };
    f["sum"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      const Value attribute = a.get_or(0, "attribute", Value::none());
      Value total = a.get_or(1, "start", Value::integer(0));
      for (const Value& item : iterate(in, v))
        total = binary_op(in, "+", total, attribute.is_none() ? item : attr_path(item, py_str(attribute)));
      return total;
    };
    auto extreme = [](bool want_max) {
      return [want_max](Interpreter& in, const Value& v, CallArgs& a) {
        ValueList items = sorted(in, iterate(in, v), false, a.get_or(0, "case_sensitive", Value::boolean(false)).truthy(),
                                 a.get_or(1, "attribute", Value::none()));
        if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
        return want_max ? items.back() : items.front();
      };
    };
    f["max"] = extreme(true);
    f["min"] = extreme(false);
    f["attr"] = [](Interpreter&, const Value& v, CallArgs& a) {
      if (a.positional.empty()) fail("attr needs a name");
      return get_attr(v, need_str(a.positional[0], "attr"));
    };
    return f;
  }();
  return table;
}

using Test = std::function<bool(Interpreter&, const Value&, CallArgs&)>;

const Value& test_arg(const CallArgs& a, const char* test) {
  if (a.positional.empty()) fail(std::string("test '") + test + "' needs an argument");
  return a.positional[0];
}

const std::unordered_map<std::string, Test>& tests() {
  static const std::unordered_map<std::string, Test> table = [] {
    std::unordered_map<std::string, Test> t;
    t["defined"] = [](Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); };
    t["undefined"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); };
    t["none"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_none(); };
    t["boolean"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); };
    t["true"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); };
    t["false"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); };
    t["integer"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_int(); };
    t["float"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_float(); };
    t["number"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_number(); };
    t["string"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_string(); };
    t["mapping"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); };
    t["iterable"] = [](Interpreter&, const Value& v, CallArgs&) {
      return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
    };
    t["sequence"] = [](Interpreter&, const Value& v, CallArgs&) {
      return v.is_undefined() || v.is_string() || (v.is_list() && !v.is_iterator()) || v.is_dict();
    };
    t["callable"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_function(); };
    t["escaped"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_markup(); };
    t["sameas"] = [](Interpreter&, const Value& v, CallArgs& a) {
      const Value& o = test_arg(a, "sameas");
      if (v.type() != o.type()) return false;
      if (v.is_none() || v.is_undefined()) return true;
      if (v.is_bool() || v.is_int()) return v.as_int() == o.as_int();
      if (v.is_float()) return v.as_float() == o.as_float();
      return v.identity() == o.identity();
    };
    t["in"] = [](Interpreter&, const Value& v, CallArgs& a) { return contains(test_arg(a, "in"), v); };
    t["eq"] = [](Interpreter&, const Value& v, CallArgs& a) { return py_equal(v, test_arg(a, "eq")); };
    t["ne"] = [](Interpreter&, const Value& v, CallArgs& a) { return !py_equal(v, test_arg(a, "ne")); };
    t["lt"] = [](Interpreter&, const Value& v, CallArgs& a) { return py_less(v, test_arg(a, "lt")); };
    t["gt"] = [](Interpreter&, const Value& v, CallArgs& a) { return py_less(test_arg(a, "gt"), v); };
    t["le"] = [](Interpreter&, const Value& v, CallArgs& a) { return !py_less(test_arg(a, "le"), v); };
    t["ge"] = [](Interpreter&, const Value& v, CallArgs& a) { return !py_less(v, test_arg(a, "ge")); };
    t["equalto"] = t["=="] = t["eq"];
    t["!="] = t["ne"];
    t["lessthan"] = t["<"] = t["lt"];
    t["greaterthan"] = t[">"] = t["gt"];
    t["<="] = t["le"];
    t[">="] = t["ge"];
    t["divisibleby"] = [](Interpreter& in, const Value& v, CallArgs& a) {
      return py_equal(binary_op(in, "%", v, test_arg(a, "divisibleby")), Value::integer(0));
    };
    t["even"] = [](Interpreter& in, const Value& v, CallArgs&) {
      return py_equal(binary_op(in, "%", v, Value::integer(2)), Value::integer(0));
    };
    t["odd"] = [](Interpreter& in, const Value& v, CallArgs&) {
      return py_equal(binary_op(in, "%", v, Value::integer(2)), Value::integer(1));
    };
    t["lower"] = [](Interpreter&, const Value& v, CallArgs&) { return has_only_case(py_str(v), false); };
    t["upper"] = [](Interpreter&, const Value& v, CallArgs&) { return has_only_case(py_str(v), true); };
    t["filter"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && filters().count(v.str()) > 0; };
    t["test"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && tests().count(v.str()) > 0; };
    return t;
  }();
  return table;
}

}  // namespace

Value apply_filter(Interpreter& in, const std::string& name, const Value& input, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) fail("No filter named '" + name + "'.");
  return it->second(in, input, args);
}

bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) fail("No test named '" + name + "'.");
  return it->second(in, v, args);
}

std::unordered_map<std::string, Value> builtin_globals() {
  std::unordered_map<std::string, Value> g;
  g["range"] = Value::function("range", [](Interpreter& in, CallArgs& a) {
    int64_t start = 0, stop, step = 1;
    if (a.positional.empty() || a.positional.size() > 3) fail("range expects 1 to 3 integer arguments");
    if (a.positional.size() == 1) {
      stop = need_int(a.positional[0], "range");
    } else {
      start = need_int(a.positional[0], "range");
      stop = need_int(a.positional[1], "range");
      if (a.positional.size() == 3) step = need_int(a.positional[2], "range");
    }
    if (step == 0) fail("range() arg 3 must not be zero");
    const double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
    if (count > 0) in.check_items(static_cast<size_t>(std::min(count, 1e18)));
    ValueList out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      out.push_back(Value::integer(i));
      if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
    }
    return Value::list(std::move(out));
  });
  auto from_args = [](const CallArgs& a) {
    Dict d;
    for (const Value& p : a.positional) {
      if (!p.is_dict()) fail("expected a mapping as positional argument");
      for (const auto& [k, v] : p.dict().items) d.set(k, v);
    }
    for (const auto& [k, v] : a.named) d.set(Value::string(k), v);
    return d;
  };
  g["namespace"] = Value::function("namespace", [from_args](Interpreter& in, CallArgs& a) {
    Value ns = Value::make_namespace(from_args(a));
    in.track_namespace(ns);
    return ns;
  });
  g["dict"] = Value::function("dict", [from_args](Interpreter&, CallArgs& a) { return Value::dict(from_args(a)); });
  return g;
}

}  // namespace revis::jinja
