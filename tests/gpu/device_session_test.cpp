// The rest of the engine with its layers on the GPU: batch invariance on
// the device, a resume from a checkpoint's rows bit-identical to a cold
// prefill, prefix reuse in RAM, speculative decoding, a grammar,
// embeddings, and a device without room for what was asked. Batch
// invariance and the resume run on qwen3 (grouped-query attention) and on
// DeepSeek's layout (deepseek2: latent attention, whose cache rows hold the
// values too, and routed plus shared experts); the rest, which the block
// does not change, on qwen3 alone (lavapipe's time on CI).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_constraint.h"
#include "gpu_test_device.h"
#include "revis/draft.h"
#include "revis/engine.h"
#include "revis/generate.h"
#include "support/testdata.h"

namespace revis {
namespace {

// A model of the shared set ("qwen3-Q4_K_M"), or of a set kept apart
// ("deepseek2/deepseek2-Q4_K_M").
std::string model_path(const std::string& name) {
  const size_t slash = name.find('/');
  const std::string set = slash == std::string::npos ? "" : name.substr(0, slash + 1);
  return testing::testdata(set + "models/" + name.substr(set.size()) + ".gguf").string();
}

std::unique_ptr<Engine> load_on_gpu(const std::string& stem, int gpu_layers = 99, uint64_t device_memory = 0) {
  auto loaded = Engine::load({.model_path = model_path(stem),
                              .n_ctx = 256,
                              .n_threads = 2,
                              .device = "vulkan",
                              .gpu_layers = gpu_layers,
                              .device_memory = device_memory});
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  return loaded.ok() ? std::move(*loaded) : nullptr;
}

std::vector<int32_t> some_tokens(int n, int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 37 + seed * 101 + 11) % 1000 + 3));
  return t;
}

std::vector<float> all_logits(const Session& s) {
  std::vector<float> out;
  for (int r = 0; r < s.n_logit_rows(); ++r) out.insert(out.end(), s.logits(r).begin(), s.logits(r).end());
  return out;
}

class DeviceSession : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    REVIS_REQUIRE_GPU();
    engine_ = load_on_gpu(GetParam());
    ASSERT_TRUE(engine_);
    ASSERT_EQ(engine_->info().gpu_layers, engine_->info().n_layer);
  }
  std::unique_ptr<Engine> engine_;
};

TEST_P(DeviceSession, APromptIsTheSameBitsAloneAndInABatch) {
  const std::vector<int32_t> a = some_tokens(21, 1), b = some_tokens(9, 2);
  auto alone = engine_->new_session();
  ASSERT_TRUE(alone->eval(a, true).ok());
  auto first = engine_->new_session(), second = engine_->new_session();
  const Engine::BatchItem items[] = {{second.get(), b, true}, {first.get(), a, true}};
  ASSERT_TRUE(engine_->eval_batch(items).ok());
  EXPECT_EQ(all_logits(*alone), all_logits(*first));
  // A decoding step beside another sequence's chunk.
  const int32_t next = 42;
  ASSERT_TRUE(alone->eval({&next, 1}).ok());
  const std::vector<int32_t> more = some_tokens(5, 3);
  const Engine::BatchItem step[] = {{first.get(), {&next, 1}, false}, {second.get(), more, false}};
  ASSERT_TRUE(engine_->eval_batch(step).ok());
  EXPECT_EQ(all_logits(*alone), all_logits(*first));
}

TEST_P(DeviceSession, AResumedCheckpointContinuesWithTheBitsOfAColdPrefill) {
  const std::vector<int32_t> tokens = some_tokens(48, 4);
  const std::span<const int32_t> prefix(tokens.data(), 30), rest(tokens.data() + 30, 18);
  auto cold = engine_->new_session();
  ASSERT_TRUE(cold->eval(tokens, true).ok());
  const std::vector<float> expected = all_logits(*cold);

  // A checkpoint's rows: the runs of a session that evaluated the prefix,
  // read back from the device, copied into an empty session.
  auto saved = engine_->new_session();
  ASSERT_TRUE(saved->eval(prefix).ok());
  auto resumed = engine_->new_session();
  const std::vector<KvRun> from = saved->kv_runs(), to = resumed->kv_runs();
  ASSERT_FALSE(from.empty());
  ASSERT_EQ(from.size(), to.size());
  for (size_t r = 0; r < from.size(); ++r)
    std::memcpy(to[r].data, from[r].data, from[r].bytes_per_position * prefix.size());
  ASSERT_TRUE(resumed->adopt_kv(prefix).ok());
  ASSERT_TRUE(resumed->eval(rest, true).ok());
  const std::vector<float> got = all_logits(*resumed);
  const size_t n_vocab = engine_->info().n_vocab;
  ASSERT_EQ(got.size(), rest.size() * n_vocab);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin() + prefix.size() * n_vocab));

  // Prefix reuse in RAM: back to 30 tokens and on again.
  cold->truncate(30);
  ASSERT_TRUE(cold->eval(rest, true).ok());
  EXPECT_EQ(all_logits(*cold), got);
}

INSTANTIATE_TEST_SUITE_P(Models, DeviceSession, ::testing::Values("qwen3-Q4_K_M", "deepseek2/deepseek2-Q4_K_M"),
                         [](const auto& info) {
                           std::string name = info.param.substr(info.param.find('/') + 1);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

using DeviceEngine = DeviceSession;

TEST_P(DeviceEngine, SpeculativeDecodingGivesTheGreedyOutput) {
  const std::vector<int32_t> prompt = some_tokens(24, 5);
  GenerateOptions options;
  options.max_tokens = 24;
  options.sampling.temperature = 0;
  options.ignore_eog = true;
  auto plain_session = engine_->new_session();
  auto plain = generate(*engine_, *plain_session, prompt, options, nullptr);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  auto drafter = prompt_lookup_drafter();
  options.drafter = drafter.get();
  options.draft_max = 4;
  auto drafted_session = engine_->new_session();
  auto drafted = generate(*engine_, *drafted_session, prompt, options, nullptr);
  ASSERT_TRUE(drafted.ok()) << drafted.status().message();
  EXPECT_EQ(plain->generated, drafted->generated);
}

TEST_P(DeviceEngine, AGrammarHoldsOnTheDevice) {
  auto grammar = Grammar::parse(R"(root ::= "yes" | "no")");
  ASSERT_TRUE(grammar.ok()) << grammar.status().message();
  GrammarConstraint constraint(*grammar, TokenVocabulary::of(*engine_));
  GenerateOptions options;
  options.max_tokens = 8;
  options.sampling.temperature = 0.8f;
  options.sampling.seed = 3;
  options.constraint = &constraint;
  auto session = engine_->new_session();
  auto result = generate(*engine_, *session, some_tokens(12, 6), options, nullptr);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_TRUE(result->text == "yes" || result->text == "no") << result->text;
}

TEST_P(DeviceEngine, EmbeddingsAgreeWithTheCpu) {
  auto cpu = Engine::load({.model_path = model_path(GetParam()), .n_ctx = 256, .n_threads = 2});
  ASSERT_TRUE(cpu.ok());
  const std::vector<int32_t> tokens = some_tokens(17, 7);
  auto on_cpu = (*cpu)->new_session()->mean_hidden_state(tokens);
  auto on_gpu = engine_->new_session()->mean_hidden_state(tokens);
  ASSERT_TRUE(on_cpu.ok() && on_gpu.ok());
  double dot = 0, a = 0, b = 0;
  for (size_t i = 0; i < on_cpu->size(); ++i) {
    dot += (*on_cpu)[i] * (*on_gpu)[i];
    a += (*on_cpu)[i] * (*on_cpu)[i];
    b += (*on_gpu)[i] * (*on_gpu)[i];
  }
  EXPECT_GT(dot / std::sqrt(a * b), 0.999);
}

INSTANTIATE_TEST_SUITE_P(Qwen3, DeviceEngine, ::testing::Values("qwen3-Q4_K_M"));

TEST(DeviceMemory, LayersThatDoNotFitAreAClearError) {
  REVIS_REQUIRE_GPU();
  auto loaded = Engine::load({.model_path = model_path("llama-spm-F16"),
                              .n_ctx = 256,
                              .device = "vulkan",
                              .gpu_layers = 99,
                              .device_memory = 1 << 20});
  ASSERT_FALSE(loaded.ok());
  const std::string message = loaded.status().message();
  EXPECT_NE(message.find("-ngl 99"), std::string::npos) << message;
  EXPECT_NE(message.find("MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("llvmpipe"), std::string::npos) << message;
}

TEST(DeviceMemory, WithoutNglAsManyLayersAsFitGoToTheDevice) {
  REVIS_REQUIRE_GPU();
  // Room for one layer of llama-spm-F16 (1.44 MiB of weights and 64 KiB
  // of a 256-position cache each), not two.
  auto one = load_on_gpu("llama-spm-F16", -1, 2 << 20);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->info().gpu_layers, 1);
  auto none = load_on_gpu("llama-spm-F16", -1, 1 << 20);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->info().gpu_layers, 0);
}

TEST(DeviceName, UnknownDevicesAreRefusedByName) {
  auto loaded = Engine::load({.model_path = model_path("llama-spm-F16"), .device = "cuda"});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("expected cpu, vulkan or vulkan:N"), std::string::npos);
}

}  // namespace
}  // namespace revis
