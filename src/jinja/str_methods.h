// Python's str methods as chat templates call them on UTF-8 text: strip,
// split and rsplit, splitlines, startswith and endswith, replace, upper,
// lower, title, capitalize, format, find and its kin, join, removeprefix
// and removesuffix, and the is* predicates; Markup stays Markup where
// markupsafe keeps it. Also the text algorithms the filters share with them.
//
// Thread-safety: pure functions (of the Interpreter too, which belongs to
// one render).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jinja/interpreter.h"
#include "jinja/value.h"

namespace revis::jinja {

// `self.name` for a string `self`: the bound method, or an empty Value
// when str has no such method.
Value string_method(const Value& self, const std::string& name);

// A character of \w: a letter, a digit or '_'.
bool is_word(uint32_t cp);
// str.islower() / str.isupper(): some cased letter, and none of the other case.
bool has_only_case(const std::string& s, bool upper);
std::string capitalize(const std::string& s);  // str.capitalize()
// jinja2's |title: words begin after runs of '-', whitespace, '(', '{', '[' or '<'.
std::string jinja_title(const std::string& s);
// str.replace(old, rep, count); count < 0: every one. The output's size is
// checked against the interpreter's limit as it grows.
std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count,
                       Interpreter& in);
std::vector<std::string> py_splitlines(const std::string& s, bool keepends);  // str.splitlines()

}  // namespace revis::jinja
