// revis perplexity on a synthetic model: the value it prints is exp(mean
// NLL) of the second half of each chunk, as computed here from the
// engine's logits, and a second run on another thread count agrees.
// --kl-divergence-base / --kl-divergence: a model against its own saved
// logits diverges by nothing, against another quantization by something,
// and a reference of another vocabulary or text is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "revis/engine.h"
#include "support/run_command.h"
#include "support/testdata.h"

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
  // Llama 2's vocabulary: a model that adds BOS, where the chunking matters.
  ASSERT_EQ(run_revis("mkmodel --arch llama --layers 2 --type Q8_0 --vocab-from " +
                      shell_quote(testing::testdata("models/llama-spm-F16.gguf").string()) + " -o " +
                      shell_quote(model))
                .exit_code,
            0);
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
  // As llama-perplexity cuts it: BOS before the whole text, then BOS first in every chunk.
  ASSERT_TRUE((*engine)->add_bos_default());
  const std::vector<int32_t> tokens = (*engine)->tokenize(body, true, false);
  const size_t n_chunks = tokens.size() / 64;
  ASSERT_GE(n_chunks, 2u);
  double sum_log = 0;
  int scored = 0;
  for (size_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + static_cast<long>(c * 64), tokens.begin() + static_cast<long>((c + 1) * 64));
    chunk[0] = (*engine)->info().bos.id;
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

// A number printed after `label` in `out`, or -1.
double printed_value(const std::string& out, const std::string& label) {
  const size_t at = out.find(label);
  if (at == std::string::npos) return -1;
  return std::atof(out.c_str() + at + label.size());
}

struct KldFixture {
  TempDir tmp;
  std::string model = tmp.file("m.gguf"), text = tmp.file("text.txt"), base = tmp.file("base.kld");

  KldFixture() {
    EXPECT_EQ(run_revis("mkmodel --arch llama --layers 2 --vocab 320 --type Q8_0 -o " + shell_quote(model)).exit_code, 0);
    std::string body;
    for (int i = 0; i < 12; ++i) body += "Sphinx of black quartz, judge my vow " + std::to_string(i) + ".\n";
    std::ofstream(text) << body;
    const auto saved = run_revis("perplexity -m " + shell_quote(model) + " -f " + shell_quote(text) +
                                 " -c 64 -t 2 --kl-divergence-base " + shell_quote(base));
    EXPECT_EQ(saved.exit_code, 0) << saved.err;
  }
  testing::CommandResult compare(const std::string& other, const std::string& extra = "") const {
    return run_revis("perplexity -m " + shell_quote(other) + " -t 2 --kl-divergence --kl-divergence-base " +
                     shell_quote(base) + extra);
  }
};

TEST(PerplexityCommand, KlDivergenceAgainstItsOwnBaseIsZero) {
  KldFixture f;
  const auto self = f.compare(f.model);
  ASSERT_EQ(self.exit_code, 0) << self.err;
  std::printf("%s", self.out.c_str());
  EXPECT_NEAR(printed_value(self.out, "mean KL divergence "), 0, 1e-6);
  EXPECT_NEAR(printed_value(self.out, "max "), 0, 1e-5);
  EXPECT_EQ(printed_value(self.out, "top-1 agreement "), 100);
  // Both perplexities are the model's; the base's from its 16-bit rows.
  EXPECT_NEAR(printed_value(self.out, "base perplexity "), printed_perplexity(self.out),
              1e-3 * printed_perplexity(self.out));

  // Q4_0 of the same model: a real divergence, some top tokens changed.
  const std::string q4 = f.tmp.file("q4.gguf");
  ASSERT_EQ(run_revis("quantize " + shell_quote(f.model) + " " + shell_quote(q4) + " Q4_0").exit_code, 0);
  const auto other = f.compare(q4, " -f " + shell_quote(f.text));
  ASSERT_EQ(other.exit_code, 0) << other.err;
  std::printf("%s", other.out.c_str());
  EXPECT_GT(printed_value(other.out, "mean KL divergence "), 1e-3);
  EXPECT_LT(printed_value(other.out, "top-1 agreement "), 100);
  EXPECT_GT(printed_value(other.out, "top-1 agreement "), 0);
}

TEST(PerplexityCommand, KlDivergenceRefusesAMismatchedBase) {
  KldFixture f;
  const std::string wide = f.tmp.file("wide.gguf");
  ASSERT_EQ(run_revis("mkmodel --arch llama --layers 2 --vocab 512 --type Q8_0 -o " + shell_quote(wide)).exit_code, 0);
  const auto vocab = f.compare(wide);
  EXPECT_EQ(vocab.exit_code, 1);
  EXPECT_NE(vocab.err.find("vocabulary of 320 tokens"), std::string::npos) << vocab.err;

  const std::string other_text = f.tmp.file("other.txt");
  std::string body;
  for (int i = 0; i < 12; ++i) body += "The quick brown fox jumps over the lazy dog " + std::to_string(i) + ".\n";
  std::ofstream(other_text) << body;
  const auto text = f.compare(f.model, " -f " + shell_quote(other_text));
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.err.find("are not the tokens of"), std::string::npos) << text.err;

  const auto ctx = f.compare(f.model, " -c 128");
  EXPECT_EQ(ctx.exit_code, 1);
  EXPECT_NE(ctx.err.find("chunks of 64 tokens"), std::string::npos) << ctx.err;

  // Cut short, or not this format at all.
  ASSERT_EQ(std::system(("truncate -s -100 " + shell_quote(f.base)).c_str()), 0);
  const auto truncated = f.compare(f.model);
  EXPECT_EQ(truncated.exit_code, 1);
  EXPECT_NE(truncated.err.find("truncated or not this format"), std::string::npos) << truncated.err;
  const auto not_kld = run_revis("perplexity -m " + shell_quote(f.model) + " --kl-divergence --kl-divergence-base " +
                                 shell_quote(f.text));
  EXPECT_EQ(not_kld.exit_code, 1);
  EXPECT_NE(not_kld.err.find("not a KL-divergence base file"), std::string::npos) << not_kld.err;
}

}  // namespace
}  // namespace revis
