// Sliding-window layers keep a ring of rows (model/kv_cache.h), not a row
// per position. On gemma3, gpt-oss and gemma4 miniatures (windows of 32,
// rings of 384 rows) with prompts several rings long: the ring wrapping
// changes no bit against a ring that never wraps; a prompt fed in chunks
// or token by token gives the bits of one cold prefill; a session goes
// back only as far as its rings still hold the window, and says so.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "revis/engine.h"
#include "support/synthetic_file.h"
#include "support/testdata.h"
#include "tools/synthetic.h"

namespace revis {
namespace {

using testing::TempDir;

constexpr int kTokens = 1200;  // three rings and more
constexpr int kContext = 1280;

std::string write_preset(const TempDir& tmp, const std::string& preset) {
  std::optional<SyntheticSpec> spec = synthetic_preset(preset);
  EXPECT_TRUE(spec.has_value()) << preset;
  spec->n_vocab = 300;
  return testing::write_synthetic(tmp, *spec);
}

std::vector<int32_t> prompt(int n) {
  std::vector<int32_t> tokens(n);
  for (int i = 0; i < n; ++i) tokens[i] = 3 + (i * 53 + i / 7) % 290;
  return tokens;
}

class SlidingRing : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = write_preset(tmp_, GetParam());
    auto file = gguf::GgufFile::open(path_);
    ASSERT_TRUE(file.ok()) << file.status().message();
    auto model = Model::load(std::shared_ptr<const gguf::GgufFile>(std::move(*file)));
    ASSERT_TRUE(model.ok()) << model.status().message();
    model_ = std::move(*model);
  }
  TempDir tmp_;
  std::string path_;
  std::unique_ptr<Model> model_;
  ThreadPool pool_{2};
};

// Every position's logits with `kv` fed `tokens` in pieces of `sizes`, in turn.
std::vector<float> logits_in_pieces(Model& model, KvCache& kv, ThreadPool& pool, const std::vector<int32_t>& tokens,
                                    std::vector<int> sizes) {
  std::vector<float> all, rows;
  int at = 0;
  for (int i = 0; at < static_cast<int>(tokens.size()); ++i) {
    const int len = std::min(sizes[i % sizes.size()], static_cast<int>(tokens.size()) - at);
    Status s = model.forward(std::span(tokens).subspan(at, len), at, kv, pool, true, rows);
    EXPECT_TRUE(s.ok()) << s.message();
    all.insert(all.end(), rows.begin(), rows.end());
    at += len;
  }
  return all;
}

TEST_P(SlidingRing, TheModelHasRingsAndThePromptWrapsThem) {
  KvCache kv(model_->config(), kContext);
  int rings = 0;
  for (int layer = 0; layer < model_->config().n_kv_layer(); ++layer)
    if (kv.shape(layer).ring) {
      ++rings;
      EXPECT_EQ(kv.shape(layer).rows, 384) << "window 32 + a chunk of 256, in tiles of 128";
    }
  EXPECT_GT(rings, 0);
  EXPECT_GT(kTokens, 3 * 384);
}

TEST_P(SlidingRing, WrappingChangesNoBit) {
  const std::vector<int32_t> tokens = prompt(kTokens);
  KvCache flat(model_->config(), kContext, /*min_ring_rows=*/kContext);
  ASSERT_GE(flat.shape(0).rows, kTokens);
  KvCache ring(model_->config(), kContext);
  const std::vector<float> expected = logits_in_pieces(*model_, flat, pool_, tokens, {kTokens});
  EXPECT_EQ(logits_in_pieces(*model_, ring, pool_, tokens, {kTokens}), expected);
}

TEST_P(SlidingRing, ChunksAndSingleTokensGiveTheBitsOfOneColdPrefill) {
  const std::vector<int32_t> tokens = prompt(kTokens);
  KvCache cold(model_->config(), kContext);
  const std::vector<float> expected = logits_in_pieces(*model_, cold, pool_, tokens, {kTokens});
  KvCache chunks(model_->config(), kContext);
  EXPECT_EQ(logits_in_pieces(*model_, chunks, pool_, tokens, {1, 70, 3, 300, 9, 64, 256}), expected);
  // Token by token across a ring's wrap at 3 x 384 (the first part in one go).
  KvCache steps(model_->config(), kContext);
  std::vector<int> sizes(kTokens - 1100 + 1, 1);
  sizes[0] = 1100;
  EXPECT_EQ(logits_in_pieces(*model_, steps, pool_, tokens, sizes), expected);
}

TEST_P(SlidingRing, GoesBackOnlyWhileTheRingsHoldTheWindow) {
  const std::vector<int32_t> tokens = prompt(kTokens);
  KvCache kv(model_->config(), kContext);
  std::vector<float> logits;
  ASSERT_TRUE(model_->forward(tokens, 0, kv, pool_, false, logits).ok());
  // The rings hold positions [1200 - 384, 1200): a window of 32 before p
  // needs p - 31 among them.
  EXPECT_EQ(kv.ring_first(), kTokens - 384);
  EXPECT_EQ(kv.rewind_reach(), 384 - 31);
  EXPECT_TRUE(kv.can_continue_at(kTokens - 384 + 31));
  EXPECT_FALSE(kv.can_continue_at(kTokens - 384 + 30));
  EXPECT_TRUE(kv.can_continue_at(0));
  Status s = model_->forward(std::span(tokens).subspan(500, 1), 500, kv, pool_, false, logits);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not the window before position 500"), std::string::npos) << s.message();

  // Back within reach: the bits of a cold prefill of the same tokens.
  const int back = kTokens - 300;
  ASSERT_TRUE(model_->forward(std::span(tokens).subspan(back, 300), back, kv, pool_, true, logits).ok());
  KvCache cold(model_->config(), kContext);
  const std::vector<float> expected = logits_in_pieces(*model_, cold, pool_, tokens, {kTokens});
  EXPECT_EQ(logits, std::vector<float>(expected.end() - 300 * model_->config().n_vocab, expected.end()));
}

// docs/kvstore.md's figures: the global layers' bytes per position, the
// rings' fixed bytes, for Gemma-3-27B's and gpt-oss-20b's published shapes.
ModelConfig sliding_shape(Architecture arch, int layers, int kv_heads, int head_dim, int window, int pattern) {
  ModelConfig c;
  c.arch = arch;
  c.n_layer = layers;
  c.n_head_kv = kv_heads;
  c.head_dim_k = c.head_dim_v = head_dim;
  c.sliding.window = window;
  c.sliding.pattern = pattern;
  return c;
}

TEST(SlidingRingBytes, RealShapes) {
  const ModelConfig gemma = sliding_shape(Architecture::kGemma3, 62, 16, 128, 1024, 6);
  EXPECT_EQ(KvCache::bytes_per_position(gemma), 10u * 16 * 256 * 2) << "10 global layers";
  EXPECT_EQ(KvCache::state_bytes(gemma), 52u * 16 * 1280 * 256 * 2) << "52 rings of 1280 rows: 520 MiB";
  const ModelConfig oss = sliding_shape(Architecture::kGptOss, 24, 8, 64, 128, 2);
  EXPECT_EQ(KvCache::bytes_per_position(oss), 12u * 8 * 128 * 2);
  EXPECT_EQ(KvCache::state_bytes(oss), 12u * 8 * 384 * 128 * 2) << "9 MiB";
  const ModelConfig global = sliding_shape(Architecture::kGptOss, 24, 8, 64, 0, 2);  // no window: no rings
  EXPECT_EQ(KvCache::bytes_per_position(global), 24u * 8 * 128 * 2);
  EXPECT_EQ(KvCache::state_bytes(global), 0u);
}

INSTANTIATE_TEST_SUITE_P(Presets, SlidingRing, ::testing::Values("gemma3-small", "gpt-oss-tiny", "gemma4-small"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace revis
