// JSON Schemas of the shapes clients send, and their grammars, shared by
// the grammar tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace revis::testing {

inline std::shared_ptr<const Grammar> schema_grammar(const nlohmann::ordered_json& schema) {
  auto g = compile_json_schema(schema);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? *g : nullptr;
}

inline std::vector<nlohmann::ordered_json> sample_schemas() {
  using json = nlohmann::ordered_json;
  return {
      json::parse(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
                      "required":["name","age"]})"),
      json::parse(R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},
                      "c":{"type":"number"}},"required":["b"]})"),
      json::parse(R"({"type":"array","items":{"type":"integer","minimum":-5,"maximum":120},
                      "minItems":1,"maxItems":4})"),
      json::parse(R"({"type":"string","enum":["red","green","blue"]})"),
      json::parse(R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string",
                      "maxLength":5}}},"required":["tags"],"additionalProperties":false})"),
      json::parse(R"({"anyOf":[{"type":"string","minLength":2,"maxLength":3},{"type":"integer",
                      "exclusiveMinimum":0,"exclusiveMaximum":10}]})"),
      json::parse(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":0,
                      "maximum":9},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},
                      "required":["v","next"]}},"$ref":"#/$defs/node"})"),
      json::parse(R"({"type":"object","properties":{"when":{"type":"string","format":"date"},
                      "id":{"type":"string","format":"uuid"},"k":{"const":"fixed"}},"required":["when","id","k"]})"),
      json::parse(R"({"type":"number","minimum":-2.5,"maximum":3.75})"),
      json::parse(R"({"type":"object","additionalProperties":{"type":"integer"}})"),
      json::parse(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}],"items":false})"),
      json::parse(R"({"type":["string","null"],"maxLength":4})"),
      json::parse(R"({"allOf":[{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},
                      {"properties":{"y":{"type":"string"}}}]})"),
      json::parse(R"({"type":"object"})"),
      json::parse(R"({"type":"object","properties":{"o1":{"type":"integer"},"r":{"type":"integer"},
                      "o2":{"type":"integer"}},"required":["r"]})"),
  };
}

}  // namespace revis::testing
