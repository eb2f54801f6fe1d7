// Python's text forms of values, which chat templates print: str() and repr()
// (True, None, ['a', "b'c"], {'k': 1.0}), json.dumps as Hugging Face's tojson
// calls it (ensure_ascii=False, optional indent and sort_keys), float repr
// (shortest round trip, 1e+20, 1.5e-05), HTML escaping for Markup, and the
// UTF-8 code point helpers behind len(), indexing and slicing of str.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace revis::jinja {

std::string py_str(const Value& v);   // str(v); undefined prints as ""
std::string py_repr(const Value& v);  // repr(v)
std::string float_repr(double f);
std::string int_str(int64_t i);

struct JsonOptions {
  int indent = -1;  // < 0: one line with ", " and ": "; else newlines and this many spaces
  bool sort_keys = false;
  bool ensure_ascii = false;  // escape non-ASCII as \uXXXX
  std::string item_separator, key_separator;  // empty: Python's defaults for the indent
};
std::string json_dumps(const Value& v, const JsonOptions& options);

std::string html_escape(std::string_view s);

// str.upper() / str.lower() for ASCII, Latin-1, Latin Extended-A, Greek and
// Cyrillic (ß uppers to SS); other scripts are left as they are.
uint32_t py_case(uint32_t cp, bool upper);
std::string py_case(std::string_view s, bool upper);
bool py_cased_letter(uint32_t cp);  // a letter py_case changes one way or the other  // markupsafe.escape: & < > ' "

// UTF-8 as code points (invalid bytes count as one code point each).
std::vector<uint32_t> utf8_decode(std::string_view s);
std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin = 0, size_t end = SIZE_MAX);
void utf8_append(std::string& out, uint32_t cp);
size_t utf8_length(std::string_view s);
bool py_isspace(uint32_t cp);  // str.isspace()'s notion of whitespace
// str.strip / lstrip / rstrip: `chars` empty means whitespace.
std::string py_strip(std::string_view s, bool left, bool right, const std::string* chars = nullptr);

}  // namespace revis::jinja
