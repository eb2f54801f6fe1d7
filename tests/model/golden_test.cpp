// The engine against llama.cpp's outputs on the shared synthetic models, with
// the tolerances of ../shared/testdata/README.md:
//  - teacher-forced logits at every position (prompt + greedy continuation),
//  - argmax at every clear position,
//  - free-running greedy generation up to the first unclear position.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "revis/engine.h"
#include "support/golden.h"
#include "support/golden_engine.h"
#include "support/kernel_backends.h"

namespace revis {
namespace {

using testing::GoldenCase;

Engine& engine_for(const std::string& path) { return testing::golden_engine(path, 512); }

// Teacher-forced logits at every position of prompt + greedy continuation,
// against the tolerances of the testdata README for the case's type.
void expect_logits_within_tolerance(const GoldenCase& g, Engine& engine) {
  testing::TeacherForced r;
  ASSERT_NO_FATAL_FAILURE(testing::teacher_forced(g, engine, r));
  if (!g.moe)
    for (const auto& [k, same] : r.clear) EXPECT_TRUE(same) << "argmax differs at clear position " << k;
  const double max_err = r.quantile(1.0), p95 = r.quantile(0.95);
  ::testing::Test::RecordProperty("max_err", std::to_string(max_err));
  ::testing::Test::RecordProperty("p95_err", std::to_string(p95));
  if (g.moe) {
    if (g.is_float_type()) {
      EXPECT_GE(r.fraction_within(0.03), 0.95) << "max " << max_err;
    }
    EXPECT_GE(r.fraction_within(0.30), 0.90) << "max " << max_err;
    EXPECT_GE(r.argmax_agreement(), 0.95);
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
  testing::expect_prompt_tokens(g, engine_for(g.model_file));
}

TEST_P(Golden, TeacherForcedLogitsWithinTolerance) {
  const GoldenCase g = testing::load_golden(GetParam());
  expect_logits_within_tolerance(g, engine_for(g.model_file));
}

TEST_P(Golden, GreedyGenerationMatchesUpToFirstUnclearPosition) {
  const GoldenCase g = testing::load_golden(GetParam());
  // MoE also stops comparing where err > 0.30.
  testing::expect_greedy_generation(g, engine_for(g.model_file), g.moe);
}

INSTANTIATE_TEST_SUITE_P(AllCases, Golden, ::testing::ValuesIn(testing::golden_case_names()),
                         [](const auto& info) { return testing::golden_test_name(info.param); });

// The same logits on every other kernel backend this CPU has (the suite
// above runs the best one): an AVX-512 machine also checks the AVX2 path
// that AVX2-only machines take, and every machine the scalar reference.
// The backend is switched for the test and switched back after it; kernels
// are looked up at each call, so the cached engines follow the switch.
using testing::BackendCase;

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

INSTANTIATE_TEST_SUITE_P(OtherBackends, GoldenOnBackend, ::testing::ValuesIn(testing::other_backend_cases(testing::golden_case_names())),
                         [](const auto& info) {
                           return testing::golden_test_name(std::string(kernel_backend_name(info.param.backend)) + "_" +
                                                           info.param.golden);
                         });

}  // namespace
}  // namespace revis
