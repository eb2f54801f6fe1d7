// Speculative decoding on the hybrids qwen35 and qwen35moe (synthetic files
// written here): their MTP block loads, and a missing or misshapen tensor
// of it is refused by name; a session that keeps its recent recurrent
// states goes back over a partly rejected draft to the bits of a cold run;
// and greedy output with each drafter (the MTP block, the target as its own
// draft model, a Q4_0 copy as a draft model, prompt lookup) equals greedy
// output without one, with drafts both accepted and rejected where the
// drafter's nature says so.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "revis/draft.h"
#include "revis/engine.h"
#include "revis/generate.h"
#include "support/gguf_copy.h"
#include "support/greedy_identity.h"
#include "support/synthetic_file.h"
#include "support/testdata.h"
#include "tools/synthetic.h"

namespace revis {
namespace {

using testing::expect_same_greedy_output;
using testing::greedy;
using testing::TempDir;

// qwen35-tiny or qwen35moe-tiny (layers 0-2 recurrent, 3 attention) with
// one MTP block, blk.4.
SyntheticSpec hybrid_spec(const std::string& preset, QuantMix mix = QuantMix::kQ8_0) {
  SyntheticSpec spec = *synthetic_preset(preset);
  spec.n_vocab = 512;
  spec.n_nextn_layer = 1;
  spec.mix = mix;
  return spec;
}

std::unique_ptr<Engine> load(const std::string& path) {
  auto engine = Engine::load({.model_path = path, .n_ctx = 256, .n_threads = 2});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return engine.ok() ? std::move(*engine) : nullptr;
}

class HybridDrafting : public ::testing::TestWithParam<const char*> {};

TEST_P(HybridDrafting, LoadsTheMtpBlockAndRefusesABrokenOne) {
  TempDir tmp;
  // F32: the misshapen copy below keeps its bytes a float32 matrix.
  const std::string good = testing::write_synthetic(tmp, hybrid_spec(GetParam(), QuantMix::kF32));
  auto engine = load(good);
  ASSERT_TRUE(engine);
  EXPECT_TRUE(engine->info().has_mtp);
  EXPECT_EQ(engine->info().n_layer, 4);
  EXPECT_EQ(engine->info().n_kv_layer, 1) << "the block is not one of the model's layers";
  std::vector<std::string> names = {"blk.4.nextn.eh_proj.weight", "blk.4.nextn.hnorm.weight", "blk.4.attn_q.weight",
                                    "blk.4.attn_k_norm.weight", "blk.4.post_attention_norm.weight"};
  names.push_back(std::string(GetParam()) == "qwen35moe-tiny" ? "blk.4.ffn_gate_exps.weight" : "blk.4.ffn_up.weight");
  testing::expect_missing_tensors_named(good, names);
  const int64_t d = engine->info().n_embd;
  testing::write_gguf_reshaped(good, tmp.file("bad.gguf"), "blk.4.nextn.eh_proj.weight", {d, d},
                               d * d * sizeof(float));
  const std::string error = testing::load_error(tmp.file("bad.gguf"));
  EXPECT_NE(error.find("tensor 'blk.4.nextn.eh_proj.weight': shape [" + std::to_string(d) + ", " + std::to_string(d) +
                       "], expected [" + std::to_string(2 * d) + ", " + std::to_string(d) + "]"),
            std::string::npos)
      << error;
}

// A verification step of five tokens of which the first two stand: going
// back to them leaves the recurrent state of a cold run over the same
// tokens, bit for bit, and the next token's logits are the cold run's.
// Without the recent states the truncated session could not continue.
TEST_P(HybridDrafting, GoesBackOverARejectedDraftToTheBitsOfAColdRun) {
  TempDir tmp;
  auto engine = load(testing::write_synthetic(tmp, hybrid_spec(GetParam()), "model.gguf"));
  ASSERT_TRUE(engine);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 20; ++i) tokens.push_back((i * 37 + 11) % 512);
  const auto prompt = std::span(tokens).first(12), step = std::span(tokens).subspan(12, 5);

  auto drafted = engine->new_session();
  drafted->keep_recent_states(5);
  EXPECT_EQ(drafted->rewind_reach(), 4) << "states after the last 5 tokens: the last 4 can be taken back";
  ASSERT_TRUE(drafted->eval(prompt).ok());
  ASSERT_TRUE(drafted->eval(step, /*all_logits=*/true).ok());
  // The states after each of the step's tokens, none before it.
  EXPECT_EQ(drafted->resumable_at(14), 14);
  EXPECT_EQ(drafted->resumable_at(13), 13);
  EXPECT_EQ(drafted->resumable_at(12), 0);
  drafted->truncate(14);

  auto cold = engine->new_session();
  ASSERT_TRUE(cold->eval(std::span(tokens).first(14)).ok());
  const auto a = drafted->recurrent_state(), b = cold->recurrent_state();
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 0u);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  EXPECT_EQ(drafted->recurrent_state_at(13).size(), a.size()) << "a state below the position stays";
  EXPECT_TRUE(drafted->recurrent_state_at(15).empty()) << "the states of the rejected tokens are gone";

  const int32_t next = 99;
  ASSERT_TRUE(drafted->eval({&next, 1}).ok());
  ASSERT_TRUE(cold->eval({&next, 1}).ok());
  const auto x = drafted->logits(0), y = cold->logits(0);
  ASSERT_EQ(x.size(), y.size());
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0);

  // Going back does not bring back what the step wrote over.
  ASSERT_TRUE(drafted->eval(std::span(tokens).subspan(15, 1)).ok());
  EXPECT_EQ(drafted->resumable_at(13), 13);
  EXPECT_EQ(drafted->resumable_at(12), 0);
}

// Greedy output with each drafter equals greedy output without one. The
// MTP block's random weights guess wrong mostly (every rejection takes the
// session back); the target drafting for itself is right every time; a
// Q4_0 copy of it now and then (its own session goes back over the drafts
// the target rejects); prompt lookup on a random model's text mostly wrong.
TEST_P(HybridDrafting, EveryDrafterKeepsGreedyOutput) {
  TempDir tmp;
  const std::string path = testing::write_synthetic(tmp, hybrid_spec(GetParam()), "model.gguf");
  const std::string q4 = testing::write_synthetic(tmp, hybrid_spec(GetParam(), QuantMix::kQ4_0), "q4.gguf");
  auto engine = load(path);
  ASSERT_TRUE(engine);
  // The drafted and accepted totals of one drafter over the prompts.
  auto run = [&](const char* name, Result<std::unique_ptr<Drafter>> drafter, int max_tokens) {
    EXPECT_TRUE(drafter.ok()) << name << ": " << drafter.status().message();
    if (!drafter.ok()) return std::pair<int, int>{};
    const auto counts = expect_same_greedy_output(*engine, **drafter, greedy(max_tokens));
    std::printf("%s %s: drafted %d accepted %d\n", GetParam(), name, counts.first, counts.second);
    EXPECT_GT(counts.first, 0) << name;
    return counts;
  };
  const auto mtp = run("mtp", mtp_drafter(*engine), 16);
  EXPECT_LT(mtp.second, mtp.first) << "random MTP weights reject";
  const auto itself = run("itself", load_draft_model(*engine, path), 16);
  EXPECT_EQ(itself.second, itself.first) << "the target drafts what it generates";
  const auto quantized = run("Q4_0 draft", load_draft_model(*engine, q4), 16);
  EXPECT_GT(quantized.second, 0);
  const auto lookup = run("lookup", prompt_lookup_drafter(), 48);
  EXPECT_LT(lookup.second, lookup.first);
}

INSTANTIATE_TEST_SUITE_P(Hybrids, HybridDrafting, ::testing::Values("qwen35-tiny", "qwen35moe-tiny"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == "qwen35-tiny" ? "qwen35" : "qwen35moe";
                         });

}  // namespace
}  // namespace revis
