// JSON Schema -> GBNF: a grammar whose sentences are JSON texts that
// validate against the schema, for constrained decoding (response_format
// json_schema, tool arguments, catalogue tasks that promise structure).
//
// Supported keywords: type (one or a list), properties, required,
// additionalProperties (false, true or a schema; absent with properties
// means false: a model asked for declared fields gets those), items,
// prefixItems, minItems, maxItems, minLength, maxLength, enum, const,
// anyOf, oneOf, allOf (of object schemas), $ref to #/$defs/... or
// #/definitions/... (recursion allowed), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (integers exactly; numbers by integer
// part, so every generated value is in range), format (date, time,
// date-time, uuid), and the annotations (title, description, default,
// examples, ...), which change nothing. Any other keyword that would
// constrain the value (pattern, multipleOf, uniqueItems, ...) is an error
// naming it and where it is, never silently dropped.
//
// Schemas nest at most 256 deep (an error naming where, past that); the
// conversion's time is linear in the schema.
//
// Bounds that keep every output finite on any model: numbers have at most
// 15 integer digits, 15 fraction digits and a 2-digit exponent (so every
// number fits a double: 3 digits let 1e345 through, which parsers refuse);
// white space between tokens is at most a newline and 20 spaces or tabs.
//
// Properties come out in the schema's order (hence ordered_json), the required ones always, the
// optional ones each present or not.
//
// Thread-safety: free functions on values.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "revis/status.h"

namespace revis {

// The grammar (root rule `root`) for values valid against `schema`.
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// The compiled grammar for a schema: given parsed (its properties in the
// order written), or as JSON text (_text). Errors: "expected a JSON Schema (a JSON
// object)", or what the converter or the grammar refused; callers prefix
// where the schema came from.
// `limits` bound the compiled grammar (Grammar::Limits).
Result<std::shared_ptr<const Grammar>> compile_json_schema(const nlohmann::ordered_json& schema,
                                                           const Grammar::Limits& limits = {});
Result<std::shared_ptr<const Grammar>> compile_json_schema_text(std::string_view text,
                                                                const Grammar::Limits& limits = {});

// Several schemas in one grammar, for grammars that embed JSON values in
// more text (tool calls): rule `rule` matches the values valid against
// `schema`; the rules share the primitives, and there is no `root`. A rule
// name must be a GBNF name ([A-Za-z0-9-]) not starting with "root", "ref-"
// or "value-" (the converter's own).
struct NamedSchema {
  std::string rule;
  nlohmann::ordered_json schema;
};
Result<std::string> json_schemas_to_gbnf(std::span<const NamedSchema> schemas);

// `text` as a GBNF string literal, quotes included.
std::string gbnf_literal(std::string_view text);

// The grammar for any JSON object (OpenAI's response_format json_object):
// an object at the top, any JSON values inside, nesting at most 16 deep.
std::string json_object_gbnf();

}  // namespace revis
