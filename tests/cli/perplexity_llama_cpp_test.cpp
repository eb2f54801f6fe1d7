// revis perplexity --kl-divergence against base files that llama.cpp's
// llama-perplexity wrote (tests/testdata/kld, made by
// scripts/golden/kld_llama_cpp.sh; llama.cpp's figures in its README).
// The file is decoded here apart from revis's reader, and the divergences
// are computed here from the engine's logits: revis must print those, the
// base's perplexity must be llama.cpp's, a model against its own base must
// diverge by no more than the file's 16-bit rounding, another quantization
// must land near llama.cpp's own figure, and a base of another model or
// text, or cut short, is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "revis/engine.h"
#include "support/run_command.h"
#include "support/testdata.h"

namespace revis {
namespace {

using testing::run_revis;
using testing::shell_quote;

// llama-perplexity's figures for these files (tests/testdata/kld/README.md).
constexpr double kFortunePpl = 30.8048;           // fortune-F16, -c 64 --chunks 4 ("Final estimate")
constexpr double kFortuneBasePpl = 30.804986;     // the same from the file's rows ("Mean PPL(base)")
constexpr double kFortuneQ4KmPpl = 31.130777;     // fortune-Q4_K_M over the same chunks
constexpr double kFortuneQ4KmKld = 0.004800;      // its mean KL divergence from the base
constexpr double kFortuneQ4KmSameTop = 91.935;    // % of 124 positions
constexpr double kSpmPpl = 73211.6091;            // llama-spm-F16, -c 32 --chunks 2 ("Final estimate")
constexpr double kSpmQ8Kld = 0.00061;             // llama-spm-Q8_0 against it
// A stored log-probability is off by at most half a step, 16 / 65535 / 2.
constexpr double kHalfStep = 8.0 / 65535;

std::string repo_file(const std::string& relative) { return std::string(REVIS_REPO_TESTDATA_DIR) + relative; }
std::string shared_file(const std::string& relative) { return testing::testdata(relative).string(); }

// llama-perplexity's layout, decoded as its own KL code reads it.
struct LlamaBase {
  int32_t n_ctx = 0, n_vocab = 0, n_chunks = 0;
  std::vector<int32_t> tokens;
  std::vector<std::vector<double>> rows;  // log p_j = min + scale * q_j

  explicit LlamaBase(const std::string& path) {
    const std::vector<uint8_t> bytes = testing::read_bytes(path);
    size_t at = 8;
    const auto next = [&](auto& value) {
      std::memcpy(&value, bytes.data() + at, sizeof value);
      at += sizeof value;
    };
    EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "_logits_");
    next(n_ctx), next(n_vocab), next(n_chunks);
    tokens.resize(static_cast<size_t>(n_ctx) * static_cast<size_t>(n_chunks));
    for (int32_t& t : tokens) next(t);
    const size_t padded = 2 * ((static_cast<size_t>(n_vocab) + 1) / 2);
    while (at < bytes.size()) {
      float scale = 0, min = 0;
      next(scale), next(min);
      std::vector<double>& row = rows.emplace_back(static_cast<size_t>(n_vocab));
      for (size_t j = 0; j < padded; ++j) {
        uint16_t q = 0;
        next(q);
        if (j < row.size()) row[j] = double{min} + double{scale} * q;
      }
    }
    EXPECT_EQ(at, bytes.size());
    EXPECT_EQ(rows.size(), static_cast<size_t>(n_chunks * (n_ctx - 1 - n_ctx / 2)));
  }

  // The token each row scores.
  int32_t next_token(size_t row) const {
    const size_t per_chunk = static_cast<size_t>(n_ctx - 1 - n_ctx / 2);
    return tokens[(row / per_chunk) * static_cast<size_t>(n_ctx) + static_cast<size_t>(n_ctx / 2) + row % per_chunk + 1];
  }

  double perplexity() const {
    double nll = 0;
    for (size_t r = 0; r < rows.size(); ++r) nll -= rows[r][static_cast<size_t>(next_token(r))];
    return std::exp(nll / static_cast<double>(rows.size()));
  }

  // Mean over the rows of KL(base || model), the model run here on the
  // base's chunks (first token BOS where it adds one), entries of the base
  // at or below log p = -16 left out as llama-perplexity leaves them.
  double mean_kld(const std::string& model) const {
    auto engine = Engine::load({.model_path = model, .n_ctx = n_ctx, .n_threads = 2});
    EXPECT_TRUE(engine.ok()) << engine.status().message();
    if (!engine.ok()) return -1;
    double sum = 0;
    size_t r = 0;
    for (int32_t c = 0; c < n_chunks; ++c) {
      std::vector<int32_t> chunk(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
      if ((*engine)->add_bos_default()) chunk[0] = (*engine)->info().bos.id;
      auto session = (*engine)->new_session();
      EXPECT_TRUE(session->eval(chunk, true).ok());
      for (int i = n_ctx / 2; i < n_ctx - 1; ++i, ++r) {
        const auto logits = session->logits(i);
        double denominator = 0;
        for (float v : logits) denominator += std::exp(static_cast<double>(v));
        for (size_t j = 0; j < logits.size(); ++j)
          if (rows[r][j] > -16)
            sum += std::exp(rows[r][j]) * (rows[r][j] - (static_cast<double>(logits[j]) - std::log(denominator)));
      }
    }
    return sum / static_cast<double>(rows.size());
  }
};

// A number printed after `label` in `out`, or NaN.
double printed(const std::string& out, const std::string& label) {
  const size_t at = out.find(label);
  return at == std::string::npos ? std::nan("") : std::atof(out.c_str() + at + label.size());
}

testing::CommandResult compare(const std::string& model, const std::string& base, const std::string& extra = "") {
  return run_revis("perplexity -m " + shell_quote(model) + " -t 2 --kl-divergence --kl-divergence-base " +
                   shell_quote(base) + extra);
}

const std::string kFortuneBase = repo_file("kld/fortune-F16.c64.kld");
const std::string kSpmBase = repo_file("kld/llama-spm-F16.c32.kld");
const std::string kValid = shared_file("trained/valid.txt");

TEST(PerplexityLlamaCppBase, TheSameModelDivergesByItsRoundingOnly) {
  const LlamaBase base(kFortuneBase);
  EXPECT_NEAR(base.perplexity(), kFortuneBasePpl, 1e-6);  // the file is llama.cpp's run
  // -f: the text must cut into the file's chunks.
  const auto r = compare(shared_file("trained/models/fortune-F16.gguf"), kFortuneBase, " -f " + shell_quote(kValid));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::printf("%s", r.out.c_str());
  EXPECT_NEAR(printed(r.out, "base perplexity "), base.perplexity(), 1e-6 * base.perplexity());
  // revis's own figure is llama.cpp's for the same -c and --chunks (F16: float arithmetic apart).
  EXPECT_NEAR(printed(r.out, "perplexity "), kFortunePpl, 2e-4 * kFortunePpl);
  EXPECT_NEAR(printed(r.out, "mean KL divergence "), base.mean_kld(shared_file("trained/models/fortune-F16.gguf")),
              1e-6);
  // One position's divergence is at most about the largest rounding of its
  // log-probabilities; the mean, of roundings either way, much less.
  EXPECT_LT(std::fabs(printed(r.out, "mean KL divergence ")), kHalfStep / 4);
  EXPECT_LT(printed(r.out, "max "), kHalfStep);
  EXPECT_LT(std::fabs(printed(r.out, "ln(PPL / PPL base) ")), kHalfStep);
  EXPECT_EQ(printed(r.out, "top-1 agreement "), 100);
}

TEST(PerplexityLlamaCppBase, AnotherQuantizationAgreesWithLlamaCpp) {
  const LlamaBase base(kFortuneBase);
  const std::string q4 = shared_file("trained/models/fortune-Q4_K_M.gguf");
  const auto r = compare(q4, kFortuneBase);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::printf("%s", r.out.c_str());
  const double kld = printed(r.out, "mean KL divergence ");
  EXPECT_NEAR(kld, base.mean_kld(q4), 1e-6);
  // The two engines round and sum Q4_K products in different orders:
  // llama.cpp's figure is matched to 10 %, about its standard error.
  EXPECT_GT(kld, 1e-3);
  EXPECT_NEAR(kld, kFortuneQ4KmKld, 0.1 * kFortuneQ4KmKld);
  EXPECT_NEAR(printed(r.out, "perplexity "), kFortuneQ4KmPpl, 0.01 * kFortuneQ4KmPpl);
  EXPECT_NEAR(printed(r.out, "top-1 agreement "), kFortuneQ4KmSameTop, 3 * 100.0 / 124);  // 3 positions
}

// Llama 2's vocabulary adds BOS: llama.cpp's file holds the text's tokens
// with one BOS before the text, and -f must cut the same chunks from it.
TEST(PerplexityLlamaCppBase, ABosModelsChunksLineUpWithTheText) {
  const LlamaBase base(kSpmBase);
  // Rows rounded by at most kHalfStep a position: the file's perplexity is llama.cpp's run's.
  EXPECT_NEAR(base.perplexity(), kSpmPpl, kHalfStep * kSpmPpl);
  const std::string f16 = shared_file("models/llama-spm-F16.gguf"), q8 = shared_file("models/llama-spm-Q8_0.gguf");
  const auto self = compare(f16, kSpmBase, " -f " + shell_quote(kValid));
  ASSERT_EQ(self.exit_code, 0) << self.err;
  std::printf("%s", self.out.c_str());
  EXPECT_NEAR(printed(self.out, "base perplexity "), base.perplexity(), 1e-6 * base.perplexity());
  EXPECT_LT(printed(self.out, "max "), kHalfStep);
  EXPECT_EQ(printed(self.out, "top-1 agreement "), 100);

  const auto other = compare(q8, kSpmBase, " -f " + shell_quote(kValid));
  ASSERT_EQ(other.exit_code, 0) << other.err;
  std::printf("%s", other.out.c_str());
  EXPECT_NEAR(printed(other.out, "mean KL divergence "), base.mean_kld(q8), 1e-6);
  EXPECT_NEAR(printed(other.out, "mean KL divergence "), kSpmQ8Kld, 0.1 * kSpmQ8Kld);
}

TEST(PerplexityLlamaCppBase, RefusesAnotherModelTextOrACutFile) {
  const auto vocab = compare(shared_file("trained/models/fortune-F16.gguf"), kSpmBase);
  EXPECT_EQ(vocab.exit_code, 1);
  EXPECT_NE(vocab.err.find("llama-spm-F16.c32.kld: logits over a vocabulary of 1024 tokens"), std::string::npos)
      << vocab.err;

  const auto text = compare(shared_file("trained/models/fortune-F16.gguf"), kFortuneBase,
                            " -f " + shell_quote(shared_file("README.md")));
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.err.find("are not the tokens of"), std::string::npos) << text.err;

  testing::TempDir tmp;
  const std::string cut = tmp.file("cut.kld");
  std::filesystem::copy_file(kFortuneBase, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 4104);  // one row short
  const auto truncated = compare(shared_file("trained/models/fortune-F16.gguf"), cut);
  EXPECT_EQ(truncated.exit_code, 1);
  EXPECT_NE(truncated.err.find("cut.kld (llama-perplexity's layout): 505836 bytes, expected 509940"),
            std::string::npos)
      << truncated.err;
}

}  // namespace
}  // namespace revis
