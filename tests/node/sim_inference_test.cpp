// The simulated engine: the shape of its results, reproducible text,
// cancellation, and the configuration that selects it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "node/config.h"
#include "node/sim_inference.h"

namespace revis::node {
namespace {

SimEngineOptions fast() { return SimEngineOptions{20000, 100000, 4096}; }

GenerateOptions tokens(int max_tokens, uint64_t seed) {
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.sampling.seed = seed;
  return o;
}

TEST(SimInference, ProducesExactlyTheRequestedTokens) {
  std::string streamed;
  int last_generated = 0;
  GenerateOptions control = tokens(12, 7);
  control.on_progress = [&](int prompt_done, int generated) {
    EXPECT_EQ(prompt_done, 30);
    last_generated = generated;
  };
  auto r = run_simulated_inference(fast(), 30, control, [&](std::string_view piece) { streamed += piece; });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->n_prompt, 30);
  EXPECT_EQ(r->generated.size(), 12u);
  EXPECT_EQ(r->stop_reason, "length");
  EXPECT_EQ(last_generated, 12);
  EXPECT_EQ(streamed, r->text);
  EXPECT_FALSE(r->text.empty());
}

TEST(SimInference, TheSeedDecidesTheText) {
  auto a = run_simulated_inference(fast(), 5, tokens(16, 1), {});
  auto b = run_simulated_inference(fast(), 5, tokens(16, 1), {});
  auto c = run_simulated_inference(fast(), 5, tokens(16, 2), {});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->text, b->text);
  EXPECT_NE(a->text, c->text);
}

TEST(SimInference, TakesAtLeastTheSimulatedTime) {
  // 100 prompt tokens at 1000/s, then 5 tokens at 100/s: the first comes
  // with the prefill, each later one 10 ms after the one before.
  auto r = run_simulated_inference(SimEngineOptions{100, 1000, 4096}, 100, tokens(5, 3), {});
  ASSERT_TRUE(r.ok());
  EXPECT_GE(r->prefill_ms, 100.0);
  EXPECT_GE(r->generate_ms, 40.0);
}

TEST(SimInference, StopsSoonAfterACancel) {
  std::atomic<bool> cancel{false};
  GenerateOptions control = tokens(1000, 3);
  control.cancel = &cancel;
  control.on_progress = [&](int, int generated) {
    if (generated == 2) cancel.store(true);
  };
  auto r = run_simulated_inference(SimEngineOptions{10, 1000, 4096}, 10, control, {});  // 100 s uncancelled
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop_reason, "cancelled");
  EXPECT_EQ(r->generated.size(), 2u);
}

TEST(SimInference, RefusesNonsense) {
  EXPECT_FALSE(run_simulated_inference(SimEngineOptions{0, 1000, 4096}, 10, tokens(10, 1), {}).ok());
  EXPECT_FALSE(run_simulated_inference(fast(), 0, tokens(10, 1), {}).ok());
}

TEST(SimInference, EstimatesTokensFromBytes) {
  EXPECT_EQ(estimate_tokens(""), 0);
  EXPECT_EQ(estimate_tokens("a"), 1);
  EXPECT_EQ(estimate_tokens("abcdefgh"), 2);
  EXPECT_EQ(estimate_tokens(std::string(400, 'x')), 100);
}

TEST(SimConfig, FileAndFlagsSelectTheSimulatedEngine) {
  auto c = parse_config("engine = \"sim\"\nsim_tokens_per_s = 250\nsim_prefill_tokens_per_s = 5000.5\n", "node.toml", "");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->engine, "sim");
  EXPECT_EQ(c->sim_tokens_per_s, 250);
  EXPECT_EQ(c->sim_prefill_tokens_per_s, 5000.5);
  ASSERT_TRUE(validate_config(*c).ok());  // no model needed
  EXPECT_EQ(c->default_tier, "default");

  ConfigOverrides o;
  o.sim_tokens_per_s = 80;
  ASSERT_TRUE(apply_overrides(*c, o).ok());
  EXPECT_EQ(c->sim_tokens_per_s, 80);
}

TEST(SimConfig, MistakesAreNamed) {
  auto bad_rate = parse_config("sim_tokens_per_s = 0\n", "node.toml", "");
  ASSERT_FALSE(bad_rate.ok());
  EXPECT_NE(bad_rate.status().message().find("node.toml: sim_tokens_per_s"), std::string::npos);
  auto not_number = parse_config("sim_tokens_per_s = \"fast\"\n", "node.toml", "");
  ASSERT_FALSE(not_number.ok());
  EXPECT_NE(not_number.status().message().find("expected a number"), std::string::npos);

  NodeConfig with_model;
  with_model.engine = "sim";
  with_model.model = "m.gguf";
  EXPECT_FALSE(validate_config(with_model).ok());
  NodeConfig unknown;
  unknown.engine = "quantum";
  unknown.model = "m.gguf";
  Status s = validate_config(unknown);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("engine \"quantum\""), std::string::npos);
}

}  // namespace
}  // namespace revis::node
