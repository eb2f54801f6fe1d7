// The engine against llama.cpp's outputs on the shared synthetic models, with
// the tolerances of ../shared/testdata/README.md:
//  - teacher-forced logits at every position (prompt + greedy continuation),
//  - argmax at every clear position,
//  - free-running greedy generation up to the first unclear position.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "revis/engine.h"
#include "revis/generate.h"
#include "support/golden.h"
#include "support/kernel_backends.h"

namespace revis {
namespace {

using testing::GoldenCase;

Engine& engine_for(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Engine>> engines;
  auto& slot = engines[path];
  if (!slot) {
    auto loaded = Engine::load({.model_path = path, .n_ctx = 512, .n_threads = 2});
    EXPECT_TRUE(loaded.ok()) << loaded.status().message();
    slot = std::move(*loaded);
  }
  return *slot;
}

// Teacher-forced logits at every position of prompt + greedy continuation,
// against the tolerances of the testdata README for the case's type.
void expect_logits_within_tolerance(const GoldenCase& g, Engine& engine) {
  ASSERT_EQ(engine.info().n_vocab, g.n_vocab);
  std::vector<int32_t> tokens = g.prompt_tokens;
  tokens.insert(tokens.end(), g.greedy.begin(), g.greedy.end() - 1);
  ASSERT_EQ(static_cast<int>(tokens.size()), g.n_rows);

  auto session = engine.new_session();
  Status s = session->eval(tokens, /*all_logits=*/true);
  ASSERT_TRUE(s.ok()) << s.message();

  std::vector<double> errors;
  int clear = 0, clear_argmax_equal = 0;
  for (int k = 0; k < g.n_rows; ++k) {
    const float* ours = session->logits(k).data();
    errors.push_back(testing::logit_error(ours, g.row(k), g.n_vocab));
    if (testing::is_clear(g.row(k), g.n_vocab)) {
      ++clear;
      const bool same = testing::argmax(ours, g.n_vocab) == testing::argmax(g.row(k), g.n_vocab);
      clear_argmax_equal += same;
      if (!g.moe) {
        EXPECT_TRUE(same) << "argmax differs at clear position " << k;
      }
    }
  }
  std::vector<double> sorted = errors;
  std::sort(sorted.begin(), sorted.end());
  const double max_err = sorted.back();
  const double p95 = sorted[static_cast<size_t>(0.95 * (sorted.size() - 1))];
  const auto fraction_within = [&](double bound) {
    return std::count_if(errors.begin(), errors.end(), [&](double e) { return e <= bound; }) /
           static_cast<double>(errors.size());
  };
  ::testing::Test::RecordProperty("max_err", std::to_string(max_err));
  ::testing::Test::RecordProperty("p95_err", std::to_string(p95));
  if (g.moe) {
    if (g.is_float_type()) {
      EXPECT_GE(fraction_within(0.03), 0.95) << "max " << max_err;
    }
    EXPECT_GE(fraction_within(0.30), 0.90) << "max " << max_err;
    EXPECT_GE(clear_argmax_equal, 0.95 * clear);
  } else if (g.is_float_type()) {
    EXPECT_LE(max_err, 0.03);
  } else {
    EXPECT_LE(max_err, 0.30);
    EXPECT_LE(p95, 0.20);
  }
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, PromptTokensMatch) {
  const GoldenCase g = testing::load_golden(GetParam());
  Engine& engine = engine_for(g.model_file);
  EXPECT_EQ(engine.tokenize(g.prompt, engine.add_bos_default(), false), g.prompt_tokens);
}

TEST_P(Golden, TeacherForcedLogitsWithinTolerance) {
  const GoldenCase g = testing::load_golden(GetParam());
  expect_logits_within_tolerance(g, engine_for(g.model_file));
}

TEST_P(Golden, GreedyGenerationMatchesUpToFirstUnclearPosition) {
  const GoldenCase g = testing::load_golden(GetParam());
  Engine& engine = engine_for(g.model_file);
  auto session = engine.new_session();
  GenerateOptions options;
  options.max_tokens = static_cast<int>(g.greedy.size());
  options.sampling.temperature = 0;
  options.ignore_eog = true;
  options.record_logits = g.moe;  // MoE also stops comparing where err > 0.30
  auto result = generate(engine, *session, g.prompt_tokens, options, nullptr);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->generated.size(), g.greedy.size());
  const int n_prompt = static_cast<int>(g.prompt_tokens.size());
  for (size_t i = 0; i < g.greedy.size(); ++i) {
    const float* gold = g.row(n_prompt - 1 + static_cast<int>(i));
    if (!testing::is_clear(gold, g.n_vocab)) break;
    if (g.moe) {
      const float* ours = i == 0 ? &result->prompt_logits[(n_prompt - 1) * size_t(g.n_vocab)]
                                 : &result->generated_logits[(i - 1) * size_t(g.n_vocab)];
      if (testing::logit_error(ours, gold, g.n_vocab) > 0.30) break;
    }
    ASSERT_EQ(result->generated[i], g.greedy[i]) << "greedy token " << i;
  }
}

// A golden case's name as a test name: letters and digits, '_' for the rest.
std::string test_name(std::string name) {
  for (char& ch : name)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllCases, Golden, ::testing::ValuesIn(testing::golden_case_names()),
                         [](const auto& info) { return test_name(info.param); });

// The same logits on every other kernel backend this CPU has (the suite
// above runs the best one): an AVX-512 machine also checks the AVX2 path
// that AVX2-only machines take, and every machine the scalar reference.
// The backend is switched for the test and switched back after it; kernels
// are looked up at each call, so the cached engines follow the switch.
struct BackendCase {
  std::string golden;
  KernelBackend backend;
};

void PrintTo(const BackendCase& c, std::ostream* os) { *os << kernel_backend_name(c.backend) << " " << c.golden; }

std::vector<BackendCase> other_backend_cases() {
  std::vector<BackendCase> cases;
  for (KernelBackend backend : testing::supported_kernel_backends())
    if (backend != best_kernel_backend())
      for (const std::string& name : testing::golden_case_names()) cases.push_back({name, backend});
  return cases;
}

class GoldenOnBackend : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override { ASSERT_TRUE(use_kernel_backend(GetParam().backend).ok()); }
  void TearDown() override { ASSERT_TRUE(use_kernel_backend(best_kernel_backend()).ok()); }
};

// A CPU with only one backend has no other to check.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GoldenOnBackend);

TEST_P(GoldenOnBackend, TeacherForcedLogitsWithinTolerance) {
  const GoldenCase g = testing::load_golden(GetParam().golden);
  expect_logits_within_tolerance(g, engine_for(g.model_file));
}

INSTANTIATE_TEST_SUITE_P(OtherBackends, GoldenOnBackend, ::testing::ValuesIn(other_backend_cases()),
                         [](const auto& info) {
                           return test_name(std::string(kernel_backend_name(info.param.backend)) + "_" + info.param.golden);
                         });

}  // namespace
}  // namespace revis
