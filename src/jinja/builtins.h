// jinja2's builtins as chat templates use them: attribute and item access
// (with the immutable sandbox's refusal of mutating methods such as
// list.append), Python's str/dict/list methods, the filters (trim, length,
// join, map, selectattr, items, dictsort, tojson as Hugging Face defines it,
// default, indent, ...), the tests (defined, none, string, mapping, ...),
// the operators on values, and the globals range(), namespace() and dict().
// The str methods live in str_methods.cpp, the filters in filters.cpp.
//
// Thread-safety: pure functions of their arguments (and of the Interpreter
// passed in, which belongs to one render).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "jinja/interpreter.h"
#include "jinja/value.h"

namespace revis::jinja {

Value get_attr(const Value& obj, const std::string& name);  // obj.name
Value get_item(const Value& obj, const Value& key);         // obj[key]
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// What a for loop, list() or join iterates: a list's items, a dict's keys, a
// string's characters; undefined iterates as empty. Throws otherwise.
ValueList iterate(Interpreter& in, const Value& v);
bool contains(const Value& container, const Value& item);  // `item in container`

Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v);

Value apply_filter(Interpreter& in, const std::string& name, const Value& input, CallArgs& args);  // filters.cpp
bool is_filter(const std::string& name);  // a filter of that name exists (the `filter` test)
bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args);

// range, namespace, dict.
std::unordered_map<std::string, Value> builtin_globals();

}  // namespace revis::jinja
