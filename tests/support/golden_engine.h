// The engine's side of the golden comparisons (golden.h), shared by the
// suites that judge a set of cases: one engine per model file, the prompt's
// tokens, free-running greedy generation, and a case's name as a test name.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <ostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "revis/engine.h"
#include "revis/generate.h"
#include "support/golden.h"
#include "support/kernel_backends.h"

namespace revis::testing {

// One engine per model file for the whole run, with a context of n_ctx.
inline Engine& golden_engine(const std::string& path, int n_ctx) {
  static std::map<std::string, std::unique_ptr<Engine>> engines;
  auto& slot = engines[path];
  if (!slot) {
    auto loaded = Engine::load({.model_path = path, .n_ctx = n_ctx, .n_threads = 2});
    EXPECT_TRUE(loaded.ok()) << loaded.status().message();
    slot = std::move(*loaded);
  }
  return *slot;
}

// Our teacher-forced logits against golden's at every position of the
// prompt and the greedy continuation: err[k], and at each clear position
// whether the argmax agrees.
struct TeacherForced {
  std::vector<double> errors;
  std::vector<std::pair<int, bool>> clear;  // (position, argmax equal)

  double fraction_within(double bound) const {
    return std::count_if(errors.begin(), errors.end(), [&](double e) { return e <= bound; }) /
           static_cast<double>(errors.size());
  }
  // The error below which this share of positions lies (0.5: the median).
  double quantile(double share) const {
    std::vector<double> sorted = errors;
    std::sort(sorted.begin(), sorted.end());
    return sorted[static_cast<size_t>(share * (sorted.size() - 1))];
  }
  double argmax_agreement() const {
    const auto equal = std::count_if(clear.begin(), clear.end(), [](const auto& c) { return c.second; });
    return clear.empty() ? 1.0 : equal / static_cast<double>(clear.size());
  }
};

inline void teacher_forced(const GoldenCase& g, Engine& engine, TeacherForced& out) {
  ASSERT_EQ(engine.info().n_vocab, g.n_vocab);
  std::vector<int32_t> tokens = g.prompt_tokens;
  tokens.insert(tokens.end(), g.greedy.begin(), g.greedy.end() - 1);
  ASSERT_EQ(static_cast<int>(tokens.size()), g.n_rows);
  auto session = engine.new_session();
  Status s = session->eval(tokens, /*all_logits=*/true);
  ASSERT_TRUE(s.ok()) << s.message();
  for (int k = 0; k < g.n_rows; ++k) {
    const float* ours = session->logits(k).data();
    out.errors.push_back(logit_error(ours, g.row(k), g.n_vocab));
    if (is_clear(g.row(k), g.n_vocab))
      out.clear.push_back({k, argmax(ours, g.n_vocab) == argmax(g.row(k), g.n_vocab)});
  }
}

inline void expect_prompt_tokens(const GoldenCase& g, Engine& engine) {
  EXPECT_EQ(engine.tokenize(g.prompt, engine.add_bos_default(), false), g.prompt_tokens);
}

// Greedy generation from the prompt equals golden's up to its first
// position that is not clear, or (stop_where_far) where our logits are
// further than 0.30 from golden's.
inline void expect_greedy_generation(const GoldenCase& g, Engine& engine, bool stop_where_far) {
  auto session = engine.new_session();
  GenerateOptions options;
  options.max_tokens = static_cast<int>(g.greedy.size());
  options.sampling.temperature = 0;
  options.ignore_eog = true;
  options.record_logits = stop_where_far;
  auto result = generate(engine, *session, g.prompt_tokens, options, nullptr);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->generated.size(), g.greedy.size());
  const int n_prompt = static_cast<int>(g.prompt_tokens.size());
  for (size_t i = 0; i < g.greedy.size(); ++i) {
    const float* gold = g.row(n_prompt - 1 + static_cast<int>(i));
    if (!is_clear(gold, g.n_vocab)) break;
    if (stop_where_far) {
      const float* ours = i == 0 ? &result->prompt_logits[(n_prompt - 1) * size_t(g.n_vocab)]
                                 : &result->generated_logits[(i - 1) * size_t(g.n_vocab)];
      if (logit_error(ours, gold, g.n_vocab) > 0.30) break;
    }
    ASSERT_EQ(result->generated[i], g.greedy[i]) << "greedy token " << i;
  }
}

// A golden case on one kernel backend: the suites that judge a set of
// cases also run them on every other backend the CPU has (the best one
// runs them as it is).
struct BackendCase {
  std::string golden;
  KernelBackend backend;
};

inline void PrintTo(const BackendCase& c, std::ostream* os) {
  *os << kernel_backend_name(c.backend) << " " << c.golden;
}

inline std::vector<BackendCase> other_backend_cases(const std::vector<std::string>& names) {
  std::vector<BackendCase> cases;
  for (KernelBackend backend : supported_kernel_backends())
    if (backend != best_kernel_backend())
      for (const std::string& name : names) cases.push_back({name, backend});
  return cases;
}

// A golden case's name as a test name: letters and digits, '_' for the rest.
inline std::string golden_test_name(std::string name) {
  for (char& ch : name)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

}  // namespace revis::testing
