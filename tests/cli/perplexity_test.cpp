// revis perplexity on a synthetic model: the value it prints is exp(mean
// NLL) of the second half of each chunk, as computed here from the
// engine's logits, and a second run on another thread count agrees.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "revis/engine.h"
#include "support/run_command.h"
#include "tokenizer/tokenizer.h"

namespace revis {
namespace {

using testing::run_revis;
using testing::shell_quote;
using testing::TempDir;

double printed_perplexity(const std::string& out) {
  double value = -1;
  long long chunks = 0;
  EXPECT_EQ(std::sscanf(out.c_str(), "perplexity %lf over %lld chunks", &value, &chunks), 2) << out;
  return value;
}

TEST(PerplexityCommand, IsExpOfTheMeanNllOfTheScoredHalves) {
  TempDir tmp;
  const std::string model = tmp.file("m.gguf"), text = tmp.file("text.txt");
  ASSERT_EQ(run_revis("mkmodel --arch llama --layers 2 --vocab 320 --type Q8_0 -o " + shell_quote(model)).exit_code, 0);
  std::string body;
  for (int i = 0; i < 12; ++i) body += "Pack my box with five dozen liquor jugs, " + std::to_string(i) + ".\n";
  std::ofstream(text) << body;

  const std::string args = "perplexity -m " + shell_quote(model) + " -f " + shell_quote(text) + " -c 64";
  const auto r = run_revis(args + " -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double printed = printed_perplexity(r.out);

  // The same chunks through the engine, probabilities by a plain softmax.
  auto engine = Engine::load({.model_path = model, .n_ctx = 64, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  const std::vector<int32_t> tokens = (*engine)->tokenize(body, false, false);
  const size_t n_chunks = tokens.size() / 64;
  ASSERT_GE(n_chunks, 2u);
  double sum_log = 0;
  int scored = 0;
  for (size_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + static_cast<long>(c * 64), tokens.begin() + static_cast<long>((c + 1) * 64));
    if ((*engine)->add_bos_default()) chunk[0] = (*engine)->tokenizer().bos();
    auto session = (*engine)->new_session();
    ASSERT_TRUE(session->eval(chunk, true).ok());
    for (int i = 32; i < 63; ++i) {
      const auto row = session->logits(i);
      double denominator = 0;
      for (float v : row) denominator += std::exp(static_cast<double>(v));
      sum_log += std::log(std::exp(static_cast<double>(row[static_cast<size_t>(chunk[i + 1])])) / denominator);
      ++scored;
    }
  }
  const double expected = std::exp(-sum_log / scored);
  std::printf("perplexity printed %.6f, computed %.6f over %d tokens\n", printed, expected, scored);
  EXPECT_NEAR(printed, expected, 1e-5 * expected);

  const auto one_thread = run_revis(args + " -t 1");
  ASSERT_EQ(one_thread.exit_code, 0) << one_thread.err;
  EXPECT_NEAR(printed_perplexity(one_thread.out), printed, 1e-3);
}

}  // namespace
}  // namespace revis
