// The Jinja lexer: template source -> tokens, the way jinja2 reads it with
// Hugging Face's settings (trim_blocks, lstrip_blocks, keep_trailing_newline
// off). Line endings become "\n" and one trailing newline is dropped; text
// between tags comes out as kText with whitespace control already applied
// ({%- -%}, {{- -}}, {#- -#}, {%+ %}, trim_blocks' newline after %} and #},
// lstrip_blocks' indentation before {% and {#); comments vanish; {% raw %}
// bodies come out as kText; inside tags, names, literals and operators.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace revis::jinja {

enum class Tok { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type;
  std::string text;  // text, name, operator, or the decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Throws TemplateError on an unterminated tag, comment, string or raw block.
std::vector<Token> tokenize(std::string_view source);

}  // namespace revis::jinja
