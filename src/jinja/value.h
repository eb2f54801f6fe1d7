// The dynamic value of the Jinja engine: what a template expression yields.
//
// Values follow Python's object model as far as chat templates can see it:
// undefined (jinja2's Undefined, which remembers why it is undefined), None,
// bool, int (64-bit; overflow is an error), float, str (UTF-8; a `markup`
// flag marks jinja2's Markup, the result of `|safe`, whose `+` escapes plain
// strings), list, tuple and one-pass iterator, dict (insertion-ordered, keys of any type),
// callables (macros, builtins, bound methods) and namespace() objects.
// Lists, tuples and dicts are immutable once built, as in jinja2's immutable
// sandbox, and shared by reference; a namespace is the one mutable object.
//
// Thread-safety: values are immutable (namespaces aside) and may be read from
// several threads; a namespace belongs to the render that created it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace revis::jinja {

class Value;
class Interpreter;
struct CallArgs;

using ValueList = std::vector<Value>;

struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // replaces an equal key in place, else appends
};

// A builtin function, macro or bound method. `call` receives the evaluated
// arguments; errors are thrown as TemplateError (error.h) inside the engine.
struct Function {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> call;
};

struct Namespace {
  Dict attrs;
};

enum class Type : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction, kNamespace };

class Value {
 public:
  Value() = default;  // undefined, without a reason
  static Value undefined(std::string why);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s, bool markup = false);
  static Value list(ValueList items);
  static Value tuple(ValueList items);
  static Value iterator(ValueList items);
  static Value dict(Dict d);
  static Value function(std::string name, std::function<Value(Interpreter&, CallArgs&)> call);
  static Value make_namespace(Dict attrs);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_float() const { return type_ == Type::kFloat; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kFloat || type_ == Type::kBool; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_list() const { return type_ == Type::kList; }  // lists and tuples
  bool is_tuple() const { return type_ == Type::kList && flag_ == kTuple; }
  // A one-pass iterator (what jinja2's map, select, unique... return): always
  // true, no len(), prints as <generator object>, not JSON.
  bool is_iterator() const { return type_ == Type::kList && flag_ == kIterator; }
  bool is_dict() const { return type_ == Type::kDict; }
  bool is_function() const { return type_ == Type::kFunction; }
  bool is_namespace() const { return type_ == Type::kNamespace; }
  bool is_markup() const { return type_ == Type::kString && flag_ == kMarkup; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_float() const { return f_; }
  double to_double() const { return type_ == Type::kFloat ? f_ : type_ == Type::kBool ? double(b_) : double(i_); }
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  const ValueList& items() const { return *static_cast<const ValueList*>(ptr_.get()); }
  const Dict& dict() const { return *static_cast<const Dict*>(ptr_.get()); }
  const Function& fn() const { return *static_cast<const Function*>(ptr_.get()); }
  Namespace& ns() const { return *static_cast<Namespace*>(ptr_.get()); }
  const void* identity() const { return ptr_.get(); }
  // Why an undefined value is undefined ("'x' is undefined"), for errors.
  std::string undefined_reason() const;

  // Python's truth value; jinja2's Undefined is false.
  bool truthy() const;
  // Python's type name ("str", "dict", "NoneType"), for error messages.
  const char* type_name() const;

 private:
  static Value boxed(Type type, std::shared_ptr<void> ptr, uint8_t flag);

  Type type_ = Type::kUndefined;
  enum : uint8_t { kPlain, kMarkup, kTuple, kIterator };
  uint8_t flag_ = kPlain;  // str: kMarkup; list: kTuple or kIterator
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<void> ptr_;  // string / ValueList / Dict / Function / Namespace by type
};

// Python's == (1 == 1.0 == True; lists and dicts compare by content).
bool py_equal(const Value& a, const Value& b);
// Python's < for numbers, strings and lists; other pairs throw TemplateError.
bool py_less(const Value& a, const Value& b);

}  // namespace revis::jinja
