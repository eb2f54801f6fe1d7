// deepseek4's compact compressor cache (model/compressor_cache.h): its
// figures for V4 Flash's shape, and where its state can continue from.
#include "model/compressor_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace revis {
namespace {

// blocks: their compression ratios; keys of `head` floats, indexer keys of `indexer`.
ModelConfig deepseek4(std::vector<int> ratios, int head, int indexer) {
  ModelConfig c;
  c.arch = Architecture::kDeepseek4;
  c.n_layer = static_cast<int>(ratios.size());
  c.head_dim_k = head;
  c.ds4.indexer_dim = indexer;
  c.ds4.compress_ratios = std::move(ratios);
  return c;
}

// V4 Flash: 43 blocks, 2 raw, 21 at ratio 4, 20 at ratio 128; keys of 512,
// indexer keys of 128.
ModelConfig v4_flash() {
  std::vector<int> ratios = {0, 0};
  for (int i = 0; i < 41; ++i) ratios.push_back(i % 2 == 0 ? 4 : 128);
  return deepseek4(ratios, 512, 128);
}

// Per token: the float16 keys one per group (ratio 4: (512 + 128) x 2 / 4
// bytes; ratio 128: 512 x 2 / 128) and, at ratio 4, the resume copies of
// 4 rows of half-width parts and scores every 128 positions ((512 + 128)
// x 2 x 4 x 4 bytes / 128).
TEST(CompressorCache, V4FlashsFigures) {
  const ModelConfig c = v4_flash();
  ASSERT_TRUE(CompressorCache::needed(c));
  EXPECT_EQ(CompressorCache::bytes_per_position(c), 21u * (320 + 160) + 20u * 8);
  EXPECT_EQ(CompressorCache::bytes_per_position(c), 10240u) << "10 KiB a token";
  // The tail: the last 8 rows of ratio 4 (parts and scores, full width:
  // 2 x 512 and 2 x 128), the last 128 of ratio 128 (512).
  EXPECT_EQ(CompressorCache::tail_bytes(c), (21u * 8 * 2 * (1024 + 256) + 20u * 128 * 2 * 512) * sizeof(float));
  // The ring: kRewind rows more than the tail.
  const size_t k = CompressorCache::kRewind;
  EXPECT_EQ(CompressorCache::ring_bytes(c),
            (21u * (8 + k) * 2 * (1024 + 256) + 20u * (128 + k) * 2 * 512) * sizeof(float));
  EXPECT_EQ(CompressorCache::resume_interval_of(c), 128);
  EXPECT_EQ(CompressorCache(c, 256).resume_interval(), 128);
  EXPECT_FALSE(CompressorCache::needed(deepseek4({0, 0}, 512, 128)));
}

// The state can continue at the positions the ring still covers, at
// resume points once restored there, and at a tail's position.
TEST(CompressorCache, ContinuesWhereItsRowsAreKept) {
  const ModelConfig c = deepseek4({0, 4, 8}, 4, 4);
  CompressorCache cache(c, 64);
  ASSERT_EQ(cache.resume_interval(), 8);
  EXPECT_EQ(cache.resume_point_at_or_below(7), 0);
  EXPECT_EQ(cache.resume_point_at_or_below(8), 8);
  EXPECT_EQ(cache.resume_point_at_or_below(23), 16);
  // Rows that say which position wrote them.
  auto write = [&](int pos) {
    for (auto which : {CompressorCache::kAttention, CompressorCache::kIndexer}) {
      std::fill_n(cache.state_parts(1, which, pos), 8, static_cast<float>(pos));
      std::fill_n(cache.state_scores(1, which, pos), 8, static_cast<float>(-pos));
      if ((pos + 1) % 4 == 0) cache.closed_group(1, which, pos);
    }
    std::fill_n(cache.state_parts(2, CompressorCache::kAttention, pos), 4, static_cast<float>(pos));
    cache.wrote(pos);
  };
  for (int pos = 0; pos < 40; ++pos) write(pos);
  EXPECT_TRUE(cache.can_continue(40));
  EXPECT_TRUE(cache.can_continue(40 - CompressorCache::kRewind));
  EXPECT_FALSE(cache.can_continue(40 - CompressorCache::kRewind - 1));
  EXPECT_FALSE(cache.can_continue(41));
  EXPECT_TRUE(cache.can_continue(0));

  std::vector<float> tail(cache.tail_floats());
  cache.save_tail(37, tail);
  // Back to resume point 16: ratio 4's previous group (12..15) is there,
  // first halves; nothing else can continue.
  cache.restore_resume_point(16);
  EXPECT_TRUE(cache.can_continue(16));
  EXPECT_FALSE(cache.can_continue(17));
  EXPECT_FALSE(cache.can_continue(15));
  EXPECT_EQ(cache.stands_at(), 16);
  for (int pos = 12; pos < 16; ++pos) {
    EXPECT_EQ(cache.state_parts(1, CompressorCache::kIndexer, pos)[0], pos);
    EXPECT_EQ(cache.state_scores(1, CompressorCache::kAttention, pos)[3], -pos);
  }
  // The tail taken at 37 puts back rows 29..36 of ratio 4 and 29..36 of ratio 8.
  cache.restore_tail(37, tail);
  EXPECT_TRUE(cache.can_continue(37));
  EXPECT_FALSE(cache.can_continue(36));
  for (int pos = 29; pos < 37; ++pos) {
    EXPECT_EQ(cache.state_parts(1, CompressorCache::kAttention, pos)[7], pos);
    EXPECT_EQ(cache.state_parts(2, CompressorCache::kAttention, pos)[0], pos);
  }
}

}  // namespace
}  // namespace revis
