#include "jinja/value.h"

#include <cmath>

#include "jinja/error.h"

namespace revis::jinja {

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (py_equal(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string why) {
  Value v;
  v.ptr_ = std::make_shared<std::string>(std::move(why));
  return v;
}

Value Value::none() {
  Value v;
  v.type_ = Type::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.type_ = Type::kBool;
  v.b_ = b;
  v.i_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.type_ = Type::kInt;
  v.i_ = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.type_ = Type::kFloat;
  v.f_ = f;
  return v;
}

Value Value::boxed(Type type, std::shared_ptr<void> ptr, uint8_t flag) {
  Value v;
  v.type_ = type;
  v.flag_ = flag;
  v.ptr_ = std::move(ptr);
  return v;
}

Value Value::string(std::string s, bool markup) {
  return boxed(Type::kString, std::make_shared<std::string>(std::move(s)), markup ? kMarkup : kPlain);
}

Value Value::list(ValueList items) { return boxed(Type::kList, std::make_shared<ValueList>(std::move(items)), kPlain); }

Value Value::tuple(ValueList items) { return boxed(Type::kList, std::make_shared<ValueList>(std::move(items)), kTuple); }

Value Value::iterator(ValueList items) {
  return boxed(Type::kList, std::make_shared<ValueList>(std::move(items)), kIterator);
}

Value Value::dict(Dict d) { return boxed(Type::kDict, std::make_shared<Dict>(std::move(d)), kPlain); }

Value Value::function(std::string name, std::function<Value(Interpreter&, CallArgs&)> call) {
  return boxed(Type::kFunction, std::make_shared<Function>(Function{std::move(name), std::move(call)}), kPlain);
}

Value Value::make_namespace(Dict attrs) {
  return boxed(Type::kNamespace, std::make_shared<Namespace>(Namespace{std::move(attrs)}), kPlain);
}

std::string Value::undefined_reason() const {
  if (ptr_ && !static_cast<const std::string*>(ptr_.get())->empty()) return str();
  return "value is undefined";
}

bool Value::truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool: return b_;
    case Type::kInt: return i_ != 0;
    case Type::kFloat: return f_ != 0;
    case Type::kString: return !str().empty();
    case Type::kList: return is_iterator() || !items().empty();
    case Type::kDict: return !dict().items.empty();
    case Type::kFunction:
    case Type::kNamespace: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (type_) {
    case Type::kUndefined: return "Undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return is_markup() ? "Markup" : "str";
    case Type::kList: return is_tuple() ? "tuple" : is_iterator() ? "generator" : "list";
    case Type::kDict: return "dict";
    case Type::kFunction: return "function";
    case Type::kNamespace: return "Namespace";
  }
  return "object";
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::kUndefined:
    case Type::kNone: return true;
    case Type::kString: return a.str() == b.str();
    case Type::kList: {
      if (a.is_iterator() || b.is_iterator()) return a.identity() == b.identity();
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!py_equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Type::kDict: {
      const Dict &x = a.dict(), &y = b.dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !py_equal(v, *w)) return false;
      }
      return true;
    }
    case Type::kFunction:
    case Type::kNamespace: return a.identity() == b.identity();
    default: return false;
  }
}

bool py_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() < b.to_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order is code point order
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_iterator() && !b.is_iterator()) {
    const ValueList &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!py_equal(x[i], y[i])) return py_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail(std::string("'<' not supported between instances of '") + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace revis::jinja
