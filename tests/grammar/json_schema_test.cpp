// Tests for grammar/json_schema.h: schemas become grammars that accept
// valid instances and refuse invalid ones, and unsupported keywords are
// refused by name.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/sample_schemas.h"

namespace revis {
namespace {

using json = nlohmann::ordered_json;
using testing::sample_schemas;
using testing::schema_grammar;

bool sentence(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accept(text) && m.can_end();
}

TEST(JsonSchema, AcceptsValidAndRefusesInvalidInstances) {
  struct Case {
    json schema;
    std::vector<std::string> valid, invalid;
  };
  std::vector<Case> cases = {
      {sample_schemas()[0],
       {R"({"name":"Ann","age":31})", R"({ "name" : "\u00e9\n" , "age" : -0 })"},
       {R"({"age":31,"name":"Ann"})", R"({"name":"Ann"})", R"({"name":"Ann","age":3.5})",
        R"({"name":"Ann","age":31,"x":1})"}},
      {sample_schemas()[1], {R"({"b":null})", R"({"a":true,"b":null,"c":-1.5e3})"}, {R"({})", R"({"a":1,"b":null})"}},
      {sample_schemas()[2], {"[0]", "[-5,120,7,33]"}, {"[]", "[121]", "[-6]", "[1,2,3,4,5]", "[01]"}},
      {sample_schemas()[3], {R"("red")", R"("blue")"}, {R"("pink")", "red"}},
      {sample_schemas()[5], {R"("ab")", R"("abc")", "9", "1"}, {R"("a")", R"("abcd")", "0", "10"}},
      {sample_schemas()[6], {R"({"v":1,"next":{"v":2,"next":null}})"}, {R"({"v":10,"next":null})"}},
      {sample_schemas()[7], {R"({"when":"2026-12-03","id":"123e4567-e89b-12d3-a456-426614174000","k":"fixed"})"},
       {R"({"when":"2026-13-03","id":"x","k":"fixed"})"}},
      {sample_schemas()[8], {"-2", "3", "-1.9", "2.999", "0.5"}, {"-3", "4", "-2.6e1", "3.8"}},
      {sample_schemas()[9], {R"({})", R"({"any":1,"key":2})"}, {R"({"a":"x"})"}},
      {sample_schemas()[10], {R"(["x",true])"}, {R"(["x"])", R"(["x",true,1])"}},
      {sample_schemas()[11], {R"("abcd")", "null"}, {R"("abcde")"}},
      {sample_schemas()[12], {R"({"x":1,"y":"z"})", R"({"x":1})"}, {R"({"y":"z"})"}},
      {sample_schemas()[14], {R"({"r":1})", R"({"o1":1,"r":2})", R"({"r":2,"o2":3})", R"({"o1":1,"r":2,"o2":3})"},
       {R"({"o1":1})", R"({"o1":1,"o2":3})", R"({,"r":1})", R"({"r":1,})"}},
  };
  for (const Case& c : cases) {
    auto g = schema_grammar(c.schema);
    ASSERT_TRUE(g) << c.schema.dump();
    for (const std::string& v : c.valid) EXPECT_TRUE(sentence(g, v)) << c.schema.dump() << "\n" << v;
    for (const std::string& v : c.invalid) EXPECT_FALSE(sentence(g, v)) << c.schema.dump() << "\n" << v;
  }
}

TEST(JsonSchema, IntegerRangesAreExact) {
  std::mt19937_64 rng(7);
  const std::vector<std::pair<int64_t, int64_t>> fixed = {{0, 0}, {0, 9}, {10, 99}, {7, 1234}, {-1234, -7},
                                                          {-15, 15}, {199, 201}, {1000, 1000}, {95, 105}};
  std::vector<std::pair<int64_t, int64_t>> ranges = fixed;
  for (int i = 0; i < 30; ++i) {
    int64_t a = static_cast<int64_t>(rng() % 20000) - 10000, b = static_cast<int64_t>(rng() % 20000) - 10000;
    ranges.push_back({std::min(a, b), std::max(a, b)});
  }
  for (auto [lo, hi] : ranges) {
    auto g = schema_grammar({{"type", "integer"}, {"minimum", lo}, {"maximum", hi}});
    ASSERT_TRUE(g);
    for (int64_t v = lo - 30; v <= hi + 30; v += (hi - lo > 400 ? 7 : 1))
      EXPECT_EQ(sentence(g, std::to_string(v)), v >= lo && v <= hi) << lo << ".." << hi << " " << v;
    EXPECT_TRUE(sentence(g, std::to_string(lo)));
    EXPECT_TRUE(sentence(g, std::to_string(hi)));
  }
}

TEST(JsonSchema, UnsupportedKeywordsAreRefusedByName) {
  for (const char* text : {R"({"type":"string","pattern":"^a+$"})", R"({"type":"number","multipleOf":3})",
                           R"({"type":"array","uniqueItems":true})", R"({"type":"string","format":"email"})",
                           R"({"not":{"type":"string"}})"}) {
    auto r = json_schema_to_gbnf(json::parse(text));
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("not supported"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(json_schema_to_gbnf(json::parse(R"({"$ref":"#/$defs/missing"})")).ok());
  EXPECT_FALSE(json_schema_to_gbnf(json::parse(R"({"type":"integer","minimum":5,"maximum":4})")).ok());
  EXPECT_FALSE(json_schema_to_gbnf(json::parse(R"({"type":"object","required":["x"]})")).ok());
}

TEST(JsonSchema, CompilesFromTextOrSaysWhyNot) {
  auto g = compile_json_schema_text(R"({"type":"object","properties":{"b":{"type":"boolean"},"a":{"const":1}}})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(sentence(*g, R"({"b":true,"a":1})")) << "properties in the order written";
  EXPECT_FALSE(sentence(*g, R"({"a":1,"b":true})"));
  for (const char* text : {R"({"type":"object")", "[1]", "\"a\"", ""}) {
    auto r = compile_json_schema_text(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("expected a JSON Schema"), std::string::npos) << r.status().message();
  }
  auto refused = compile_json_schema_text(R"({"type":"string","pattern":"a"})");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("pattern"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace revis
