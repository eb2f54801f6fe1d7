// DeepSeek V4 (deepseek4) against llama.cpp's outputs in
// ../shared/testdata/deepseek4, with that folder's tolerances (its
// README): the indexer's choice, the router and the hyper-connections move
// more positions than in other models, so a share of positions, the median
// error and the argmax agreement are judged rather than the worst position.
// Then hostile files (refused by key or tensor name, never a crash), and
// the cache: a session cut back and continued, or resumed from copied
// rows as checkpoints resume it, gives the bits a fresh one gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "tools/quantize.h"
#include "tools/synthetic.h"
#include "revis/draft.h"
#include "revis/engine.h"
#include "support/active_bytes.h"
#include "support/gguf_copy.h"
#include "support/golden.h"
#include "support/golden_engine.h"
#include "support/greedy_identity.h"
#include "support/kernel_backends.h"

namespace revis {
namespace {

using testing::GoldenCase;

std::vector<std::string> deepseek4_cases() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(testing::testdata("deepseek4/golden"))) {
    const std::string file = entry.path().filename().string();
    if (file.ends_with(".json") && file != "prompts.json") names.push_back("deepseek4/" + file.substr(0, file.size() - 5));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Contexts up to the longest prompt and its continuation.
Engine& engine_for(const std::string& path) { return testing::golden_engine(path, 1024); }

// README's bounds: the share of positions within `near`, the median error
// and the share of clear positions whose argmax agrees.
struct Bounds {
  double near, share, median, argmax;
};
Bounds bounds_for(const GoldenCase& g) {
  return g.is_float_type() ? Bounds{0.03, 0.85, 0.01, 0.95} : Bounds{0.30, 0.80, 0.12, 0.93};
}

class Deepseek4Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Deepseek4Golden, PromptTokensMatch) {
  const GoldenCase g = testing::load_golden(GetParam());
  testing::expect_prompt_tokens(g, engine_for(g.model_file));
}

void expect_logits_within_tolerance(const GoldenCase& g, Engine& engine) {
  testing::TeacherForced r;
  ASSERT_NO_FATAL_FAILURE(testing::teacher_forced(g, engine, r));
  const Bounds b = bounds_for(g);
  const double within = r.fraction_within(b.near), median = r.quantile(0.5), agreement = r.argmax_agreement();
  ::testing::Test::RecordProperty("within", std::to_string(within));
  ::testing::Test::RecordProperty("median_err", std::to_string(median));
  ::testing::Test::RecordProperty("argmax_agreement", std::to_string(agreement));
  EXPECT_GE(within, b.share) << "median " << median << ", max " << r.quantile(1.0);
  EXPECT_LE(median, b.median) << "within " << within;
  EXPECT_GE(agreement, b.argmax) << r.clear.size() << " clear positions";
}

TEST_P(Deepseek4Golden, TeacherForcedLogitsWithinTolerance) {
  const GoldenCase g = testing::load_golden(GetParam());
  expect_logits_within_tolerance(g, engine_for(g.model_file));
}

TEST_P(Deepseek4Golden, GreedyGenerationMatchesUpToFirstUnclearPosition) {
  const GoldenCase g = testing::load_golden(GetParam());
  testing::expect_greedy_generation(g, engine_for(g.model_file), /*stop_where_far=*/true);
}

INSTANTIATE_TEST_SUITE_P(AllCases, Deepseek4Golden, ::testing::ValuesIn(deepseek4_cases()),
                         [](const auto& info) { return testing::golden_test_name(info.param.substr(info.param.find('/') + 1)); });

// The same on every other kernel backend this CPU has: their sums round
// differently, and the indexer's and the router's near-ties must still
// fall within the tolerances.
using testing::BackendCase;

class Deepseek4GoldenOnBackend : public ::testing::TestWithParam<BackendCase> {};

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Deepseek4GoldenOnBackend);

TEST_P(Deepseek4GoldenOnBackend, TeacherForcedLogitsWithinTolerance) {
  testing::ScopedKernelBackend backend(GetParam().backend);
  ASSERT_TRUE(backend.ok());
  const GoldenCase g = testing::load_golden(GetParam().golden);
  expect_logits_within_tolerance(g, engine_for(g.model_file));
}

INSTANTIATE_TEST_SUITE_P(OtherBackends, Deepseek4GoldenOnBackend, ::testing::ValuesIn(testing::other_backend_cases(deepseek4_cases())),
                         [](const auto& info) {
                           const std::string& name = info.param.golden;
                           return testing::golden_test_name(std::string(kernel_backend_name(info.param.backend)) +
                                                            "_" + name.substr(name.find('/') + 1));
                         });

const std::string kModel = testing::testdata("deepseek4/models/deepseek4-F16.gguf").string();

// Copies the F16 file to `path`, leaving out the tensor `drop` (if any);
// `metadata` may then override keys.
void write_copy(const std::string& path, const std::string& drop,
                const std::function<void(gguf::GgufWriter&)>& metadata = nullptr) {
  testing::write_gguf_copy(
      kModel, path, [&](const gguf::TensorInfo& t, auto&, auto&, auto&) { return t.name != drop; }, metadata);
}

std::string load_error(const std::string& path, int n_ctx = 256) {
  auto engine = Engine::load({.model_path = path, .n_ctx = n_ctx, .n_threads = 2});
  return engine.ok() ? std::string("loaded") : engine.status().message();
}

void expect_refused(const std::function<void(gguf::GgufWriter&)>& metadata, const std::vector<std::string>& needles,
                    const std::string& drop = "") {
  testing::TempDir tmp;
  write_copy(tmp.file("m.gguf"), drop, metadata);
  const std::string error = load_error(tmp.file("m.gguf"));
  for (const std::string& needle : needles) EXPECT_NE(error.find(needle), std::string::npos) << error << " lacks " << needle;
}

TEST(Deepseek4Loader, RefusesAnInvalidCompressionRatio) {
  expect_refused([](gguf::GgufWriter& out) { out.set_i32_array("deepseek4.attention.compress_ratios", {0, 4, 64, 4, 128, 0}); },
                 {"deepseek4.attention.compress_ratios", "block 2 has 64", "expected 0, 4 or 128"});
  expect_refused([](gguf::GgufWriter& out) { out.set_i32_array("deepseek4.attention.compress_ratios", {0, 4, 128}); },
                 {"deepseek4.attention.compress_ratios: 3 values", "one per block, 6"});
}

TEST(Deepseek4Loader, RefusesAnIndexerTopKBeyondTheContext) {
  // context_length 4096 holds 1024 groups of 4.
  expect_refused([](gguf::GgufWriter& out) { out.set_u32("deepseek4.attention.indexer.top_k", 5000); },
                 {"deepseek4.attention.indexer.top_k: 5000", "1..1024"});
  expect_refused([](gguf::GgufWriter& out) { out.set_u32("deepseek4.attention.indexer.top_k", 0); },
                 {"deepseek4.attention.indexer.top_k: 0"});
}

TEST(Deepseek4Loader, RefusesAHyperConnectionCountOfZero) {
  expect_refused([](gguf::GgufWriter& out) { out.set_u32("deepseek4.hyper_connection.count", 0); },
                 {"deepseek4.hyper_connection.count: 0", "expected an integer in 1..64"});
  // A count the tensors do not have: the mix is refused by shape.
  expect_refused([](gguf::GgufWriter& out) { out.set_u32("deepseek4.hyper_connection.count", 2); },
                 {"output_hc_fn.weight", "shape [1024, 4], expected [512, 2]"});
  expect_refused([](gguf::GgufWriter& out) { out.set_u32("deepseek4.hyper_connection.sinkhorn_iterations", 0); },
                 {"deepseek4.hyper_connection.sinkhorn_iterations: 0"});
}

TEST(Deepseek4Loader, NamesAMissingTensor) {
  for (const std::string name : {"blk.1.indexer.attn_q_b.weight", "blk.2.attn_compressor_ape.weight",
                                 "blk.0.ffn_gate_tid2eid.weight", "output_hc_fn.weight", "blk.4.attn_sinks.weight"}) {
    SCOPED_TRACE(name);
    expect_refused(nullptr, {"tensor '" + name + "' is missing", "expected"}, name);
  }
}

TEST(Deepseek4Loader, RefusesOtherExpertScoring) {
  expect_refused([](gguf::GgufWriter& out) { out.set_u32("deepseek4.expert_gating_func", 2); },
                 {"deepseek4.expert_gating_func: 2", "sqrt(softplus)"});
}

// Every cached row is indexed by position (model/kv_cache.h): a session
// cut back to n tokens and run on gives the logits a fresh session gives,
// bit for bit, wherever n falls in a compressor's group (n a multiple of
// four, as resumes are: model.cpp's kChunk says why).
TEST(Deepseek4Cache, ACutBackSessionContinuesAsAFreshOne) {
  const GoldenCase g = testing::load_golden("deepseek4/deepseek4-F16.long");
  Engine& engine = engine_for(g.model_file);
  const std::vector<int32_t>& tokens = g.prompt_tokens;
  const int n = static_cast<int>(tokens.size());
  auto fresh = engine.new_session();
  ASSERT_TRUE(fresh->eval(tokens, /*all_logits=*/true).ok());
  auto reused = engine.new_session();
  ASSERT_TRUE(reused->eval(tokens, false).ok());
  for (int cut : {320, 192, 68}) {
    SCOPED_TRACE(cut);
    reused->truncate(cut);
    ASSERT_TRUE(reused->eval(std::span(tokens).subspan(cut), /*all_logits=*/true).ok());
    for (int k = cut; k < n; ++k)
      ASSERT_EQ(std::memcmp(reused->logits(k - cut).data(), fresh->logits(k).data(), g.n_vocab * sizeof(float)), 0)
          << "position " << k;
  }
}

// What a checkpoint does (src/kvstore): the first n positions of every run
// copied into a new session, which adopts the tokens and runs on. The runs
// hold the compressor planes too, so the logits are a fresh session's.
TEST(Deepseek4Cache, RunsCopiedIntoANewSessionResumeIt) {
  const GoldenCase g = testing::load_golden("deepseek4/deepseek4-F16.long");
  Engine& engine = engine_for(g.model_file);
  const std::vector<int32_t>& tokens = g.prompt_tokens;
  const int n = static_cast<int>(tokens.size()), kept = 192;
  auto fresh = engine.new_session();
  ASSERT_TRUE(fresh->eval(tokens, /*all_logits=*/true).ok());
  auto resumed = engine.new_session();
  const std::vector<KvRun> from = fresh->kv_runs(), to = resumed->kv_runs();
  ASSERT_EQ(from.size(), to.size());
  size_t width = 0;
  for (size_t r = 0; r < from.size(); ++r) {
    ASSERT_EQ(from[r].bytes_per_position, to[r].bytes_per_position);
    std::memcpy(to[r].data, from[r].data, kept * from[r].bytes_per_position);
    width += from[r].bytes_per_position;
  }
  EXPECT_EQ(width, resumed->kv_bytes_per_token());
  EXPECT_GT(engine.info().kv_state_bytes_per_token, 0u);
  ASSERT_TRUE(resumed->adopt_kv(std::span(tokens).first(kept)).ok());
  ASSERT_TRUE(resumed->eval(std::span(tokens).subspan(kept), /*all_logits=*/true).ok());
  for (int k = kept; k < n; ++k)
    ASSERT_EQ(std::memcmp(resumed->logits(k - kept).data(), fresh->logits(k).data(), g.n_vocab * sizeof(float)), 0)
        << "position " << k;
}

// revis quantize keeps the hash-routing table as it is (I32) and converts
// the rest: the F16 file made Q8_0 here meets llama.cpp's outputs on its
// own Q8_0 file within the quantized tolerances.
TEST(Deepseek4Quantize, AQ8_0CopyMeetsTheQ8_0Golden) {
  testing::TempDir tmp;
  ThreadPool pool(2);
  ASSERT_TRUE(quantize_model(kModel, tmp.file("q8.gguf"), QuantMix::kQ8_0, pool, nullptr).ok());
  auto file = gguf::GgufFile::open(tmp.file("q8.gguf"));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->tensor("blk.0.ffn_gate_tid2eid.weight")->type, TensorType::I32);
  EXPECT_EQ((*file)->tensor("blk.1.attn_q_b.weight")->type, TensorType::Q8_0);
  const GoldenCase g = testing::load_golden("deepseek4/deepseek4-Q8_0.long");
  auto engine = Engine::load({.model_path = tmp.file("q8.gguf"), .n_ctx = 512, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  testing::TeacherForced r;
  ASSERT_NO_FATAL_FAILURE(testing::teacher_forced(g, **engine, r));
  EXPECT_GE(r.fraction_within(0.30), 0.80);
  EXPECT_LE(r.quantile(0.5), 0.12);
}

// The file's multi-token-prediction block (blk.5) loads, and drafting
// with it (fed the stream's copies, not one hidden state) leaves greedy
// output as it is; random weights draft almost nothing right, so only
// the drafts are counted.
TEST(Deepseek4Mtp, DraftsKeepGreedyOutput) {
  Engine& engine = engine_for(kModel);
  EXPECT_TRUE(engine.info().has_mtp);
  EXPECT_EQ(engine.info().n_layer, 5);
  auto drafter = mtp_drafter(engine);
  ASSERT_TRUE(drafter.ok()) << drafter.status().message();
  const auto [drafted, accepted] = testing::expect_same_greedy_output(engine, **drafter, testing::greedy(12));
  EXPECT_GT(drafted, 0);
  EXPECT_LE(accepted, drafted);
}

// A multi-token-prediction block that compresses is refused, as llama.cpp
// refuses it.
TEST(Deepseek4Loader, RefusesACompressingPredictionBlock) {
  expect_refused([](gguf::GgufWriter& out) { out.set_i32_array("deepseek4.attention.compress_ratios", {0, 4, 128, 4, 128, 4}); },
                 {"the multi-token-prediction block 5 has 4", "expected 0"});
}

// mkmodel's V4 shape: the file it writes loads, a prompt long enough for
// the indexer's choice and the x128 compressor runs to finite logits, and
// the bytes a token reads count n_expert_used of each expert stack.
TEST(Deepseek4Synthetic, TheTinyShapeRunsAndCountsTheUsedExperts) {
  SyntheticSpec spec = *synthetic_preset("deepseek-v4-tiny");
  spec.mix = QuantMix::kQ8_0;
  testing::TempDir tmp;
  ThreadPool pool(2);
  ASSERT_TRUE(write_synthetic_model(spec, tmp.file("m.gguf"), pool, nullptr).ok());
  auto engine = Engine::load({.model_path = tmp.file("m.gguf"), .n_ctx = 320, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  EXPECT_EQ((*engine)->info().architecture, "deepseek4");

  auto file = gguf::GgufFile::open(tmp.file("m.gguf"));
  ASSERT_TRUE(file.ok());
  // Position biases and the hash table are no products.
  const uint64_t expected =
      testing::active_weight_bytes(**file, spec.n_expert, spec.n_expert_used, [](const std::string& name) {
        return name.ends_with("_ape.weight") || name.ends_with("tid2eid.weight");
      });
  EXPECT_EQ((*engine)->info().bytes_per_token, expected);
  // The dry run's count agrees with the file and with the model.
  Result<SyntheticSize> size = synthetic_model_size(spec);
  ASSERT_TRUE(size.ok()) << size.status().message();
  uint64_t tensor_bytes = 0;
  for (const gguf::TensorInfo& t : (*file)->tensors()) tensor_bytes += t.n_bytes;
  EXPECT_EQ(size->n_tensors, static_cast<int>((*file)->tensors().size()));
  EXPECT_EQ(size->tensor_bytes, tensor_bytes);
  EXPECT_EQ(size->bytes_per_token, expected);

  std::vector<int32_t> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back((i * 37 + 11) % 1000);
  auto session = (*engine)->new_session();
  ASSERT_TRUE(session->eval(tokens, /*all_logits=*/true).ok());
  for (int k : {0, 130, 299})
    for (float v : session->logits(k)) ASSERT_TRUE(std::isfinite(v)) << "position " << k;
}

// V4 Flash's real shape: 284B parameters, about 13B of them read per
// token (the published figures), counted at two bytes each in F16.
TEST(Deepseek4Synthetic, TheFlashShapeHasV4FlashsParameterCounts) {
  SyntheticSpec spec = *synthetic_preset("deepseek-v4-flash");
  Result<SyntheticSize> size = synthetic_model_size(spec);
  ASSERT_TRUE(size.ok()) << size.status().message();
  EXPECT_EQ(size->n_tensors, 1328);
  EXPECT_NEAR(static_cast<double>(size->tensor_bytes) / 2, 284.4e9, 0.2e9);
  EXPECT_NEAR(static_cast<double>(size->bytes_per_token) / 2, 13.3e9, 0.1e9);
  // Shrunk to four blocks and 32 experts (every kind of block, the
  // benchmark's file): the experts not read cost file bytes only.
  spec.n_layer = 4;
  Result<SyntheticSize> shrunk = synthetic_model_size(spec);
  spec.n_expert = 32;
  Result<SyntheticSize> fewer = synthetic_model_size(spec);
  ASSERT_TRUE(shrunk.ok() && fewer.ok());
  EXPECT_LT(fewer->tensor_bytes, shrunk->tensor_bytes / 4);
  // Per token only the routers shrink (a row per expert, at most float32).
  EXPECT_LT(fewer->bytes_per_token, shrunk->bytes_per_token);
  EXPECT_GT(fewer->bytes_per_token, shrunk->bytes_per_token - 4 * 4096 * 256 * sizeof(float));
}

}  // namespace
}  // namespace revis
