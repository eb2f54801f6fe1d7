#include "base/json_reader.h"

#include <string>

#include <gtest/gtest.h>

namespace revis {
namespace {

std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonReader, ReadsWhatNlohmannReads) {
  const std::string text = R"({"b":[1,2.5,"x",null,true,{"c":{}}],"a":-3,"u":18446744073709551615})";
  auto j = read_json(text, 8);
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(*j, nlohmann::json::parse(text));
  auto o = read_ordered_json(text, 8);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->dump(), nlohmann::ordered_json::parse(text).dump());
}

TEST(JsonReader, OrderedObjectsKeepTheWrittenOrder) {
  auto o = read_ordered_json(R"({"z":1,"a":{"y":2,"b":3},"m":4})", 8);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->dump(), R"({"z":1,"a":{"y":2,"b":3},"m":4})");
}

TEST(JsonReader, ARepeatedKeyKeepsItsFirstPlaceAndLastValue) {
  const std::string text = R"({"a":1,"b":2,"a":3})";
  auto o = read_ordered_json(text, 4);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->dump(), nlohmann::ordered_json::parse(text).dump());
  EXPECT_EQ(o->dump(), R"({"a":3,"b":2})");
  auto j = read_json(text, 4);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["a"], 3);
}

TEST(JsonReader, DepthIsCountedInOpenContainers) {
  EXPECT_TRUE(read_json("1", 0).ok());
  EXPECT_FALSE(read_json("[1]", 0).ok());
  EXPECT_TRUE(read_json(nested_arrays(64), 64).ok());
  auto deep = read_json(nested_arrays(65), 64);
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than 64 levels"), std::string::npos) << deep.status().message();
}

TEST(JsonReader, TheDepthErrorSaysWhere) {
  auto r = read_ordered_json(R"({"messages":[{"content":[[[1]]]}]})", 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("messages[0].content[0]"), std::string::npos) << r.status().message();
}

// A million levels would overflow any stack if anything recursed on the
// way in; the reader stops at the limit.
TEST(JsonReader, AMillionLevelsAreRefusedNotRecursed) {
  auto r = read_ordered_json(nested_arrays(1'000'000), 64);
  EXPECT_FALSE(r.ok());
}

TEST(JsonReader, InvalidTextNamesTheByte) {
  auto r = read_json(R"({"a":1,})", 8);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("at byte 8"), std::string::npos) << r.status().message();
  EXPECT_FALSE(read_json("{} x", 8).ok());
  EXPECT_FALSE(read_json("\"\xff\"", 8).ok());
  EXPECT_FALSE(read_json("", 8).ok());
}

// The shape that made nlohmann's ordered parse quadratic: each object's
// big member first, a small one after it. 20,000 levels, well inside the
// limit here, must still be read (and quickly: a copy per level would
// take minutes, and the test's time limit would end it).
TEST(JsonReader, DeepObjectsWithTheBigMemberFirstAreRead) {
  std::string text;
  for (int i = 0; i < 20'000; ++i) text += R"({"p":)";
  text += "1";
  for (int i = 0; i < 20'000; ++i) text += R"(,"t":"o"})";
  auto o = read_ordered_json(text, 30'000);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->begin().key(), "p");
}

TEST(JsonReader, ToOrderedJsonKeepsValues) {
  const nlohmann::json j = nlohmann::json::parse(R"({"b":[1,{"d":null}],"a":"x"})");
  EXPECT_EQ(to_ordered_json(j).dump(), j.dump());
}

}  // namespace
}  // namespace revis
