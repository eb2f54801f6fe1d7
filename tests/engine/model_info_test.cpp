// What Engine::load derives from the file: the identity hash (digest and
// fingerprint), the chat template, the special tokens, the weight types;
// and where it holds the weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/model_digest.h"
#include "gguf/gguf.h"
#include "hash/sha256.h"
#include "quant/quant.h"
#include "revis/engine.h"
#include "support/testdata.h"
#include "tokenizer/tokenizer.h"

namespace revis {
namespace {

std::unique_ptr<Engine> load(const std::string& path) {
  auto engine = Engine::load({.model_path = path, .n_ctx = 128, .n_threads = 1});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Every logit of a prompt, evaluated in one call or one token per call.
std::vector<float> prompt_logits(Engine& engine, const std::string& text, bool token_by_token) {
  auto session = engine.new_session();
  const std::vector<int32_t> prompt = engine.tokenize(text, true, false);
  std::vector<float> all;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (token_by_token || i == 0) {
      const auto part = token_by_token ? std::span(prompt).subspan(i, 1) : std::span(prompt);
      EXPECT_TRUE(session->eval(part, true).ok());
    }
    const size_t row = token_by_token ? 0 : i;
    all.insert(all.end(), session->logits(row).begin(), session->logits(row).end());
  }
  return all;
}

// Mapped or read into memory, the weights are the same values: read into
// memory, the matrices the kernels have a stripe form for are kept in
// stripes and multiplied by other kernels, whose float sums round
// differently from the row kernels'; without stripes the bits agree.
TEST(ModelInfo, WeightsMappedOrCopiedGiveTheSameLogits) {
  const std::string path = testing::testdata("models/llama-spm-Q4_K_M.gguf").string();
  std::vector<std::vector<float>> logits;
  uint64_t striped = 0;
  size_t n_vocab = 0;
  for (WeightMemory weights : {WeightMemory::kMap, WeightMemory::kCopy}) {
    auto engine = Engine::load({.model_path = path, .weights = weights, .n_ctx = 64, .n_threads = 2});
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    EXPECT_EQ((*engine)->info().weights_copied, weights == WeightMemory::kCopy);
    if (weights == WeightMemory::kMap) EXPECT_EQ((*engine)->info().striped_matrices, 0u);
    striped += (*engine)->info().striped_matrices;
    n_vocab = (*engine)->info().n_vocab;
    logits.push_back(prompt_logits(**engine, "The weights are the same bytes", false));
  }
  ASSERT_FALSE(logits[0].empty());
  ASSERT_EQ(logits[0].size(), logits[1].size());
  if (striped == 0) {
    EXPECT_EQ(std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)), 0);
  } else {
    // Rounding apart: per row, the largest difference over the row's root
    // mean square (the golden tests' measure, whose bound for quantized
    // files is 0.30) stays under 0.05.
    for (size_t row = 0; row < logits[0].size() / n_vocab; ++row) {
      const float* a = &logits[0][row * n_vocab];
      const float* b = &logits[1][row * n_vocab];
      double squares = 0, worst = 0;
      for (size_t j = 0; j < n_vocab; ++j) {
        squares += static_cast<double>(a[j]) * a[j];
        worst = std::max(worst, static_cast<double>(std::fabs(a[j] - b[j])));
      }
      EXPECT_LE(worst / std::sqrt(squares / n_vocab), 0.05) << "row " << row;
    }
  }
}

// With every matrix in stripes, a token's logits carry the same bits
// whether the prompt went in one call or one token per call: what lets
// speculative decoding verify its drafts in groups. qwen2-Q8_0 is all
// Q8_0, which AVX-512 keeps in stripes; with AVX2, which keeps only Q4_K
// so, the Q4_K matrices of a Q4_K_M file are striped and the logits agree
// within rounding.
TEST(ModelInfo, StripedWeightsGiveATokenTheSameBitsAloneOrInAPrompt) {
  const bool avx512 = kernel_backend_supported(KernelBackend::kAvx512);
  if (!avx512 && !kernel_backend_supported(KernelBackend::kAvx2)) GTEST_SKIP() << "no kernels with stripe forms here";
  const std::string path = testing::testdata(avx512 ? "models/qwen2-Q8_0.gguf" : "models/llama-spm-Q4_K_M.gguf").string();
  auto engine = Engine::load({.model_path = path, .weights = WeightMemory::kCopy, .n_ctx = 64, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  EXPECT_GT((*engine)->info().striped_matrices, 0u);
  const std::string text = "One token at a time, or all of them at once";
  const std::vector<float> together = prompt_logits(**engine, text, false);
  const std::vector<float> alone = prompt_logits(**engine, text, true);
  ASSERT_EQ(together.size(), alone.size());
  if (avx512) {
    EXPECT_EQ(std::memcmp(together.data(), alone.data(), together.size() * sizeof(float)), 0);
  } else {
    for (size_t i = 0; i < together.size(); ++i)
      ASSERT_NEAR(together[i], alone[i], 2e-3 * (std::fabs(together[i]) + 1.0f)) << "logit " << i;
  }
}

#ifdef __linux__
// A file far smaller than the memory available is read into memory.
TEST(ModelInfo, AutomaticPlacementCopiesASmallModel) {
  auto engine = load(testing::testdata("models/qwen2-Q8_0.gguf").string());
  ASSERT_TRUE(engine);
  EXPECT_TRUE(engine->info().weights_copied);
}
#endif

TEST(ModelInfo, TheDigestOfASmallFileIsItsPlainSha256AndTheFingerprintItsHead) {
  const auto path = testing::testdata("models/qwen2-Q8_0.gguf");
  auto engine = load(path.string());
  ASSERT_TRUE(engine);
  const auto bytes = testing::read_bytes(path);
  const std::string hex = sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  EXPECT_EQ(engine->info().digest, "sha256:" + hex);
  EXPECT_EQ(engine->info().fingerprint, std::stoull(hex.substr(0, 16), nullptr, 16));
  auto other = load(testing::testdata("models/qwen2-Q4_0.gguf").string());
  ASSERT_TRUE(other);
  EXPECT_NE(other->info().digest, engine->info().digest);
  EXPECT_NE(other->info().fingerprint, engine->info().fingerprint);
}

TEST(ModelInfo, ALargeFileIsSampledAndSeesChanges) {
  std::vector<uint8_t> file(40 << 20, 'x');  // 40 MiB: above the whole-file limit
  const std::string a = model_digest(file);
  EXPECT_EQ(a.rfind("sha256-sampled:", 0), 0u) << a;
  EXPECT_EQ(model_digest(file), a);
  file[20] = 'y';  // inside the first 4 MiB
  const std::string b = model_digest(file);
  EXPECT_NE(b, a);
  file[file.size() - 1] = 'y';  // inside the last 4 MiB
  EXPECT_NE(model_digest(file), b);
  file.push_back('x');  // the size counts
  EXPECT_NE(model_digest(file), b);
}

TEST(ModelInfo, TheFingerprintIsReadFromTheDigest) {
  EXPECT_EQ(model_fingerprint("sha256:0123456789abcdef" + std::string(48, '0')), 0x0123456789abcdefull);
  EXPECT_EQ(model_fingerprint("sha256-sampled:ffffffffffffffff" + std::string(48, '1')), ~0ull);
  EXPECT_EQ(model_fingerprint("sha256:0123"), 0u);
  EXPECT_EQ(model_fingerprint("no digest"), 0u);
  EXPECT_EQ(model_fingerprint("sha256:0123456789abcdeX" + std::string(48, '0')), 0u);
}

TEST(ModelInfo, CarriesTheTemplateTheSpecialTokensAndTheWeightTypes) {
  for (const char* stem : {"qwen2-Q8_0", "llama-spm-Q4_K_M", "llama-bpe-F16"}) {
    const std::string path = testing::testdata(std::string("models/") + stem + ".gguf").string();
    auto engine = load(path);
    ASSERT_TRUE(engine);
    const ModelInfo& info = engine->info();
    // What the file and the tokenizer say, read here the long way round.
    auto file = gguf::GgufFile::open(path);
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(info.chat_template, *(*file)->get_string("tokenizer.chat_template")) << stem;
    EXPECT_EQ(info.file_type, *(*file)->get_int("general.file_type", -1)) << stem;
    uint64_t tensor_bytes = 0;
    for (const auto& t : (*file)->tensors()) tensor_bytes += t.n_bytes;
    uint64_t by_type = 0;
    for (const auto& [type, bytes] : info.tensor_bytes_by_type) by_type += bytes;
    EXPECT_EQ(by_type, tensor_bytes) << stem;
    auto tokenizer = Tokenizer::from_gguf(**file);
    ASSERT_TRUE(tokenizer.ok()) << stem;
    const Tokenizer& tok = **tokenizer;
    EXPECT_EQ(info.bos.id, tok.bos()) << stem;
    EXPECT_EQ(info.eos.id, tok.eos()) << stem;
    EXPECT_EQ(info.eot.id, tok.eot()) << stem;
    ASSERT_GE(info.eos.id, 0) << stem;
    EXPECT_EQ(info.eos.text, tok.token_text(info.eos.id)) << stem;
    EXPECT_FALSE(info.eos.text.empty()) << stem;
    if (info.bos.id >= 0) {
      EXPECT_EQ(info.bos.text, tok.token_text(info.bos.id)) << stem;
    }
    ASSERT_FALSE(info.eog_tokens.empty()) << stem;
    EXPECT_TRUE(std::is_sorted(info.eog_tokens.begin(), info.eog_tokens.end()));
    for (int32_t id : info.eog_tokens) EXPECT_TRUE(engine->is_end_of_generation(id));
    EXPECT_NE(std::find(info.eog_tokens.begin(), info.eog_tokens.end(), info.eos.id), info.eog_tokens.end());
  }
}

}  // namespace
}  // namespace revis
