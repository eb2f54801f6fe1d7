// What jinja's builtins (the str, dict and list methods, the filters, the
// tests and the globals) share: reading their arguments with Python's type
// errors, string results that keep Markup, and bound methods.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "jinja/interpreter.h"
#include "jinja/value.h"

namespace revis::jinja {

// The argument as a string, or as an integer (bools count); a type error
// naming `what` otherwise, and undefined's own reason for undefined.
std::string need_str(const Value& v, const char* what);
int64_t need_int(const Value& v, const char* what);

// A string result that keeps Markup when its source was Markup, as
// markupsafe's str methods do.
Value like(const Value& self, std::string s);

// `obj.name` before the call: a method bound to its object.
Value method(const std::string& name, std::function<Value(Interpreter&, CallArgs&)> fn);

// A dict's (key, value) pairs as a list of tuples: dict.items() and |items.
Value items_of(const Dict& d);

}  // namespace revis::jinja
