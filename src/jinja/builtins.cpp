#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <utility>

#include "jinja/builtin_args.h"
#include "jinja/error.h"
#include "jinja/python_text.h"
#include "jinja/str_methods.h"

namespace revis::jinja {
namespace {

[[noreturn]] void type_error(const std::string& what) { fail(what); }

}  // namespace

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

Value like(const Value& self, std::string s) { return Value::string(std::move(s), self.is_markup()); }

Value method(const std::string& name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  return Value::function(name, std::move(fn));
}

Value items_of(const Dict& d) {
  ValueList out;
  for (const auto& [k, v] : d.items) out.push_back(Value::tuple({k, v}));
  return Value::list(std::move(out));
}

namespace {

Value unsafe_method(const std::string& type, const std::string& name) {
  return Value::function(name, [type, name](Interpreter&, CallArgs&) -> Value {
    fail("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
  });
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

namespace {

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
    t["filter"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && is_filter(v.str()); };
    t["test"] = [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && tests().count(v.str()) > 0; };
    return t;
  }();
  return table;
}

}  // namespace

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
