// Batch invariance (revis/engine.h): on every golden model, a session's
// logits are the same bits evaluated alone or in Engine::eval_batch beside
// up to seven others, whether the others prefill or decode, join mid-stream
// or leave; and the batched rows keep llama.cpp's choices (golden.h).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "revis/engine.h"
#include "support/golden.h"
#include "support/kernel_backends.h"
#include "support/spread_tokens.h"

namespace revis {
namespace {

using Tokens = std::vector<int32_t>;
using Rows = std::vector<float>;

constexpr int kSequences = 8, kSteps = 3;

// Every golden case (read once: the logits files are large), by model file.
const std::map<std::string, std::map<std::string, testing::GoldenCase>>& cases_by_file() {
  static const auto cases = [] {
    std::map<std::string, std::map<std::string, testing::GoldenCase>> by_file;
    for (const std::string& name : testing::golden_case_names()) {
      testing::GoldenCase g = testing::load_golden(name);
      by_file[g.model_file].emplace(name, std::move(g));
    }
    return by_file;
  }();
  return cases;
}

// The model files of every golden set, and deepseek4's (its own folder).
std::vector<std::string> model_files() {
  std::vector<std::string> files;
  for (const auto& [file, cases] : cases_by_file()) files.push_back(file);
  for (const auto& entry : std::filesystem::directory_iterator(testing::testdata("deepseek4/models")))
    files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<KernelBackend> simd_backends() {
  std::vector<KernelBackend> backends = testing::supported_kernel_backends();
  std::erase(backends, KernelBackend::kScalar);
  return backends;
}

// The golden cases of a model file, by name (none for deepseek4's).
const std::map<std::string, testing::GoldenCase>& golden_cases(const std::string& file) {
  static const std::map<std::string, testing::GoldenCase> none;
  const auto found = cases_by_file().find(file);
  return found == cases_by_file().end() ? none : found->second;
}

// kSequences different prompts: the golden ones, then ids spread over the
// vocabulary, 3 to 38 tokens long.
std::vector<Tokens> prompts(const Engine& engine, const std::map<std::string, testing::GoldenCase>& cases) {
  std::vector<Tokens> out;
  for (const auto& [name, g] : cases)
    if (static_cast<int>(out.size()) < kSequences) out.push_back(g.prompt_tokens);
  while (static_cast<int>(out.size()) < kSequences) {
    const int n = static_cast<int>(out.size());
    out.push_back(testing::spread_tokens(engine.info().n_vocab, 3 + 5 * n, n));
  }
  return out;
}

// The token sequence `i` decodes at step `s`.
int32_t step_token(const Engine& engine, int i, int s) { return (i * 7919 + s * 389 + 11) % engine.info().n_vocab; }

Rows all_rows(const Session& session) {
  Rows rows;
  for (int r = 0; r < session.n_logit_rows(); ++r) rows.insert(rows.end(), session.logits(r).begin(), session.logits(r).end());
  return rows;
}

bool same_bits(const Rows& a, const Rows& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Each sequence alone: its prompt's rows, then one row per decoding step.
struct Alone {
  std::vector<Rows> prompt;
  std::vector<std::vector<Rows>> steps;
};

Alone run_alone(Engine& engine, const std::vector<Tokens>& prompts) {
  Alone alone;
  for (int i = 0; i < kSequences; ++i) {
    auto session = engine.new_session();
    EXPECT_TRUE(session->eval(prompts[i], /*all_logits=*/true).ok());
    alone.prompt.push_back(all_rows(*session));
    alone.steps.emplace_back();
    for (int s = 0; s < kSteps; ++s) {
      const int32_t t = step_token(engine, i, s);
      EXPECT_TRUE(session->eval({&t, 1}).ok());
      alone.steps.back().push_back(all_rows(*session));
    }
  }
  return alone;
}

// A model file, on each SIMD kernel backend this CPU has. Not the scalar
// one: it has no stripe forms, so every row takes its one single-token
// kernel, the same path the SIMD backends take for their unstriped types,
// and its plain loops would take minutes here.
class BatchInvariance : public ::testing::TestWithParam<std::tuple<std::string, KernelBackend>> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(backend_.ok());
    auto loaded = Engine::load({.model_path = file(), .n_ctx = 512, .n_threads = 2});
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    engine_ = std::move(*loaded);
  }
  const std::string& file() const { return std::get<0>(GetParam()); }

  const testing::ScopedKernelBackend backend_{std::get<1>(GetParam())};
  std::unique_ptr<Engine> engine_;
};

TEST_P(BatchInvariance, EverySequenceGetsTheBitsItGetsAlone) {
  Engine& engine = *engine_;
  const auto& cases = golden_cases(file());
  const std::vector<Tokens> prompt = prompts(engine, cases);
  const Alone alone = run_alone(engine, prompt);

  for (int k : {1, 2, 5, kSequences}) {
    SCOPED_TRACE("a batch of " + std::to_string(k));
    std::vector<std::unique_ptr<Session>> sessions;
    std::vector<Engine::BatchItem> items;
    for (int i = 0; i < k; ++i) {
      sessions.push_back(engine.new_session());
      items.push_back({sessions.back().get(), prompt[i], /*all_logits=*/true});
    }
    ASSERT_TRUE(engine.eval_batch(items).ok());
    for (int i = 0; i < k; ++i) ASSERT_TRUE(same_bits(all_rows(*sessions[i]), alone.prompt[i])) << "prompt " << i;
    std::vector<int32_t> tokens(k);
    for (int s = 0; s < kSteps; ++s) {
      for (int i = 0; i < k; ++i) {
        tokens[i] = step_token(engine, i, s);
        items[i] = {sessions[i].get(), {&tokens[i], 1}, false};
      }
      ASSERT_TRUE(engine.eval_batch(items).ok());
      for (int i = 0; i < k; ++i)
        ASSERT_TRUE(same_bits(all_rows(*sessions[i]), alone.steps[i][s])) << "sequence " << i << ", step " << s;
    }
  }

  // The batched prompt rows keep llama.cpp's argmax at its clear positions
  // (dense models; a mixture's near-ties are judged by the golden suites).
  int i = 0;
  for (const auto& [name, g] : cases) {
    if (g.moe || i >= kSequences) break;
    const int n_vocab = g.n_vocab;
    for (size_t k = 0; k < g.prompt_tokens.size(); ++k)
      if (testing::is_clear(g.row(k), n_vocab))
        EXPECT_EQ(testing::argmax(&alone.prompt[i][k * n_vocab], n_vocab), testing::argmax(g.row(k), n_vocab))
            << name << " position " << k;
    ++i;
  }
}

// Sequences 0 and 1 decode; sequence 2's prompt joins in two chunks while
// they do; sequence 1 leaves (cancelled) before the last step. Nobody's
// bits move.
TEST_P(BatchInvariance, JoiningAndLeavingChangeNoOtherSequence) {
  Engine& engine = *engine_;
  const std::vector<Tokens> prompt = prompts(engine, golden_cases(file()));
  const Alone alone = run_alone(engine, prompt);
  const int n_vocab = engine.info().n_vocab;

  auto a = engine.new_session(), b = engine.new_session(), c = engine.new_session();
  ASSERT_TRUE(engine.eval_batch(std::vector<Engine::BatchItem>{{a.get(), prompt[0]}, {b.get(), prompt[1]}}).ok());
  const Tokens& joining = prompt[2];
  const int half = static_cast<int>(joining.size()) / 2;
  int32_t ta = 0, tb = 0;
  for (int s = 0; s < kSteps; ++s) {
    ta = step_token(engine, 0, s);
    tb = step_token(engine, 1, s);
    std::vector<Engine::BatchItem> items{{a.get(), {&ta, 1}}};
    if (s < kSteps - 1) items.push_back({b.get(), {&tb, 1}});
    if (s == 0) items.push_back({c.get(), std::span(joining).first(half), true});
    if (s == 1) items.push_back({c.get(), std::span(joining).subspan(half), true});
    if (s == kSteps - 1) b.reset();  // cancelled: its session is gone
    ASSERT_TRUE(engine.eval_batch(items).ok());
    ASSERT_TRUE(same_bits(all_rows(*a), alone.steps[0][s])) << "step " << s;
    if (b) ASSERT_TRUE(same_bits(all_rows(*b), alone.steps[1][s])) << "step " << s;
    if (s < 2) {
      const size_t from = s == 0 ? 0 : half, rows = s == 0 ? half : joining.size() - half;
      const Rows expected(alone.prompt[2].begin() + from * n_vocab, alone.prompt[2].begin() + (from + rows) * n_vocab);
      ASSERT_TRUE(same_bits(all_rows(*c), expected)) << "the joining prompt's chunk " << s;
    }
  }
}

// A Q4_K_M model read from a mapped file, whose matrices stay as stored
// rows and are never kept in stripes: each sequence gets the same bits in a
// batch of five as alone, and on AVX-512, which reads both of its types
// (Q4_K, Q6_K) through their stripes' lane_dot, the very bits of the same
// model read into memory and kept in stripes.
TEST(MappedWeights, KeepBatchInvarianceAndTheStripesBits) {
  const std::string file = testing::testdata("models/llama-spm-Q4_K_M.gguf").string();
  const auto& cases = golden_cases(file);
  constexpr int kBatch = 5;
  for (KernelBackend backend : simd_backends()) {
    SCOPED_TRACE(kernel_backend_name(backend));
    const testing::ScopedKernelBackend scoped(backend);
    ASSERT_TRUE(scoped.ok());
    auto mapped = Engine::load({.model_path = file, .weights = WeightMemory::kMap, .n_ctx = 512, .n_threads = 2});
    ASSERT_TRUE(mapped.ok()) << mapped.status().message();
    ASSERT_EQ((*mapped)->info().striped_matrices, 0u);
    const std::vector<Tokens> prompt = prompts(**mapped, cases);
    const Alone alone = run_alone(**mapped, prompt);

    std::vector<std::unique_ptr<Session>> sessions;
    std::vector<Engine::BatchItem> items;
    for (int i = 0; i < kBatch; ++i) {
      sessions.push_back((*mapped)->new_session());
      items.push_back({sessions.back().get(), prompt[i], /*all_logits=*/true});
    }
    ASSERT_TRUE((*mapped)->eval_batch(items).ok());
    for (int i = 0; i < kBatch; ++i) ASSERT_TRUE(same_bits(all_rows(*sessions[i]), alone.prompt[i])) << "prompt " << i;

    if (backend != KernelBackend::kAvx512) continue;
    auto copied = Engine::load({.model_path = file, .weights = WeightMemory::kCopy, .n_ctx = 512, .n_threads = 2});
    ASSERT_TRUE(copied.ok()) << copied.status().message();
    ASSERT_GT((*copied)->info().striped_matrices, 0u);
    const Alone in_stripes = run_alone(**copied, prompt);
    for (int i = 0; i < kSequences; ++i) {
      ASSERT_TRUE(same_bits(in_stripes.prompt[i], alone.prompt[i])) << "prompt " << i << ", mapped against copied";
      for (int s = 0; s < kSteps; ++s)
        ASSERT_TRUE(same_bits(in_stripes.steps[i][s], alone.steps[i][s])) << "sequence " << i << ", step " << s;
    }
  }
}

TEST(EvalBatch, RefusesAWholeBatchThatCannotRun) {
  auto loaded = Engine::load({.model_path = testing::testdata("models/qwen3-Q8_0.gguf").string(), .n_ctx = 16,
                              .n_threads = 2});
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  Engine& engine = **loaded;
  auto a = engine.new_session(), b = engine.new_session();
  const Tokens fits{1, 2, 3}, overflows(17, 5), outside{1, engine.info().n_vocab};
  for (const Tokens& bad : {overflows, outside}) {
    const Status s = engine.eval_batch(std::vector<Engine::BatchItem>{{a.get(), fits}, {b.get(), bad}});
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(a->n_past(), 0) << "a refused batch changes no session";
    EXPECT_EQ(b->n_past(), 0);
  }
  const Status twice = engine.eval_batch(std::vector<Engine::BatchItem>{{a.get(), fits}, {a.get(), fits}});
  EXPECT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("share a cache"), std::string::npos) << twice.message();
  EXPECT_EQ(a->n_past(), 0);
}

INSTANTIATE_TEST_SUITE_P(GoldenModels, BatchInvariance,
                         ::testing::Combine(::testing::ValuesIn(model_files()),
                                            ::testing::ValuesIn(simd_backends())),
                         [](const auto& info) {
                           std::string name = std::filesystem::path(std::get<0>(info.param)).stem().string() + "_" +
                                              kernel_backend_name(std::get<1>(info.param));
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace revis
