#include "fabric/node_state.h"

#include <gtest/gtest.h>

namespace revis::fabric {
namespace {

TEST(NodeState, RoundTripsThroughJson) {
  NodeState s;
  s.name = "node-b";
  s.instance = "0123456789abcdef";
  s.catalog = "sha256:abc";
  s.engine = "gguf";
  s.tiers = {"large", "small"};
  s.loaded = {"small"};
  s.busy = true;
  s.queue_length = 3;
  s.current = "t-17";
  s.tok_per_s = 123.5;
  s.executed = 42;
  s.kv_prefixes["small"] = {"9f2c61d04ab7e513", "03be94c1d2a85f70"};
  s.job = NodeState::Job{"summarize", "generating", 812, 812, 40, 512, 930.5};
  auto back = node_state_from_json(nlohmann::json::parse(to_json(s).dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_TRUE(back->job.has_value());
  EXPECT_EQ(back->job->task, "summarize");
  EXPECT_EQ(back->job->phase, "generating");
  EXPECT_EQ(back->job->generated, 40);
  EXPECT_EQ(back->job->max_tokens, 512);
  EXPECT_DOUBLE_EQ(back->job->elapsed_ms, 930.5);
  // A job of the wrong shape (from another version) reads as empty fields,
  // never as an error: it is only shown.
  nlohmann::json odd = to_json(s);
  odd["job"] = {{"task", 5}, {"generated", "many"}};
  auto lenient = node_state_from_json(odd);
  ASSERT_TRUE(lenient.ok());
  EXPECT_EQ(lenient->job->task, "");
  EXPECT_EQ(lenient->job->generated, 0);
  EXPECT_EQ(back->name, "node-b");
  EXPECT_EQ(back->instance, s.instance);
  EXPECT_EQ(back->catalog, "sha256:abc");
  EXPECT_EQ(back->tiers, s.tiers);
  EXPECT_TRUE(back->serves("large"));
  EXPECT_FALSE(back->serves("huge"));
  EXPECT_TRUE(back->has_loaded("small"));
  EXPECT_FALSE(back->has_loaded("large"));
  EXPECT_TRUE(back->busy);
  EXPECT_EQ(back->queue_length, 3);
  EXPECT_EQ(back->current, "t-17");
  EXPECT_DOUBLE_EQ(back->tok_per_s, 123.5);
  EXPECT_EQ(back->executed, 42u);
  EXPECT_EQ(back->kv_prefixes, s.kv_prefixes);
  nlohmann::json older = to_json(s);
  older.erase("kvPrefixes");
  auto from_older = node_state_from_json(older);
  ASSERT_TRUE(from_older.ok()) << "a node without kvPrefixes publishes none";
  EXPECT_TRUE(from_older->kv_prefixes.empty());
  s.current.clear();
  EXPECT_TRUE(to_json(s)["current"].is_null()) << "idle: no current ticket";
}

TEST(NodeState, MalformedStatusNamesTheField) {
  NodeState s;
  s.name = "x";
  nlohmann::json j = to_json(s);
  j["busy"] = "yes";
  auto r = node_state_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("busy"), std::string::npos);
  j = to_json(s);
  j["tiers"] = {1, 2};
  r = node_state_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tiers"), std::string::npos);
  j = to_json(s);
  j.erase("catalog");
  r = node_state_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("catalog"), std::string::npos);
  j = to_json(s);
  j["kvPrefixes"] = {{"small", {"9f2c61d04ab7e513", 7}}};
  r = node_state_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kvPrefixes.small"), std::string::npos) << r.status().message();
  EXPECT_FALSE(node_state_from_json(nlohmann::json::array()).ok());
}

}  // namespace
}  // namespace revis::fabric
