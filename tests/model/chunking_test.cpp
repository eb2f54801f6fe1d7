// A prompt longer than the forward pass's chunk (256 tokens) and than
// attention's block of queries (64) against the same tokens fed in small
// pieces, on every kernel backend the CPU has.
// Where the pass cuts a prompt changes nothing but the order of float sums
// (four-token kernels against one-token ones): F16 models, whose kernels
// sum alike for one token and four, must agree to rounding; quantized ones
// within the testdata README's tolerance for them (0.30 x rms), as random
// tokens through these small models turn a last-bit difference, where the
// cache rounds to float16, into a few hundredths of rms. A position, causal
// mask or cache row misplaced at a cut moves logits by several times their
// rms.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "revis/engine.h"
#include "support/golden.h"
#include "support/kernel_backends.h"
#include "support/testdata.h"

namespace revis {
namespace {

void expect_pieces_match_whole(const std::string& model_file, double tolerance) {
  auto loaded = Engine::load({.model_path = testing::testdata("models/" + model_file).string(), .n_ctx = 320, .n_threads = 2});
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  Engine& engine = **loaded;
  const int n_vocab = engine.info().n_vocab;
  std::mt19937 rng(7);
  std::vector<int32_t> tokens(300);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));

  auto whole = engine.new_session();
  Status s = whole->eval(tokens, /*all_logits=*/true);
  ASSERT_TRUE(s.ok()) << s.message();

  auto pieces = engine.new_session();
  const int sizes[] = {1, 70, 3, 257, 9, 64};
  size_t at = 0;
  for (int i = 0; at < tokens.size(); ++i) {
    const size_t len = std::min<size_t>(sizes[i % 6], tokens.size() - at);
    s = pieces->eval(std::span(tokens).subspan(at, len), /*all_logits=*/true);
    ASSERT_TRUE(s.ok()) << s.message();
    for (size_t k = 0; k < len; ++k) {
      const double error = testing::logit_error(pieces->logits(static_cast<int>(k)).data(),
                                                whole->logits(static_cast<int>(at + k)).data(), n_vocab);
      ASSERT_LE(error, tolerance) << model_file << ": position " << at + k << " (a piece of " << len << " from " << at << ")";
    }
    at += len;
  }
}

class Chunking : public ::testing::TestWithParam<KernelBackend> {};

TEST_P(Chunking, LongPromptMatchesSmallPieces) {
  const testing::ScopedKernelBackend backend(GetParam());
  ASSERT_TRUE(backend.ok());
  for (const char* model : {"llama-spm-F16.gguf", "qwen3moe-F16.gguf"}) expect_pieces_match_whole(model, 1e-4);
  for (const char* model : {"llama-bpe-Q8_0.gguf", "qwen2-Q4_0.gguf", "qwen3-Q4_K_M.gguf"}) expect_pieces_match_whole(model, 0.30);
}

INSTANTIATE_TEST_SUITE_P(Backends, Chunking, ::testing::ValuesIn(testing::supported_kernel_backends()),
                         [](const ::testing::TestParamInfo<KernelBackend>& info) { return kernel_backend_name(info.param); });

}  // namespace
}  // namespace revis
