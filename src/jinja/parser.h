// The Jinja parser: tokens -> syntax tree (ast.h), following jinja2's
// grammar and operator precedence (filters and tests bind tighter than
// arithmetic, `**` is left-associative, `a if c else b`, chained comparisons).
// Nesting deeper than `max_depth` (brackets, blocks) is refused rather than
// recursed into. Statements: if/elif/else, for (with `if` filter, else,
// loop targets that unpack), set (expression, namespace attribute, block
// capture with filters), macro, call, filter, break, continue, raw and
// generation; include, import, extends and block are refused.
//
// Thread-safety: a pure function.
#pragma once

#include <memory>
#include <string_view>

#include "jinja/ast.h"

namespace revis::jinja {

// Throws TemplateError ("line N: ...") on a syntax error.
std::unique_ptr<Template> parse(std::string_view source, int max_depth);

}  // namespace revis::jinja
