// The KL-divergence base file: rows written from logits read back as the
// log-softmax within the format's resolution, with the exact top token;
// llama-perplexity's layout reads back as its bytes say; and a file that is
// cut short, of hostile sizes or not of either layout is refused.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "support/testdata.h"
#include "tools/kld_base_file.h"

namespace revis {
namespace {

TEST(KldBaseFile, RowsRoundTripWithinTheResolution) {
  testing::TempDir dir;
  const std::string path = dir.file("base.kld");
  constexpr int kVocab = 1000, kCtx = 16, kChunks = 2;
  KldBaseHeader header{.n_vocab = kVocab, .n_ctx = kCtx, .n_chunks = kChunks, .tokens = {}};
  for (int i = 0; i < kCtx * kChunks; ++i) header.tokens.push_back((i * 37) % kVocab);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<std::vector<float>> rows;
  {
    auto writer = KldBaseWriter::create(path, header);
    ASSERT_TRUE(writer.ok()) << writer.status().message();
    for (int r = 0; r < kChunks * kld_rows_per_chunk(kCtx); ++r) {
      std::vector<float> logits(kVocab);
      for (float& v : logits) v = normal(rng);
      logits[static_cast<size_t>(r)] += 40;  // a far top, so the floor is reached
      rows.push_back(logits);
      ASSERT_TRUE((*writer)->add_row(logits).ok());
    }
    ASSERT_TRUE((*writer)->finish().ok());
  }
  auto reader = KldBaseReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_EQ((*reader)->header().tokens, header.tokens);
  for (size_t r = 0; r < rows.size(); ++r) {
    auto row = (*reader)->next_row();
    ASSERT_TRUE(row.ok()) << row.status().message();
    EXPECT_EQ(row->top, static_cast<int32_t>(r));
    const std::vector<double> exact = log_softmax(rows[r]);
    double sum = 0, worst = 0;
    for (size_t j = 0; j < exact.size(); ++j) {
      sum += std::exp(row->log_probs[j]);
      // Below the floor every value reads as the floor.
      if (exact[j] > exact[r] - kLogRange) worst = std::max(worst, std::fabs(row->log_probs[j] - exact[j]));
      else EXPECT_NEAR(row->log_probs[j], exact[r] - kLogRange, 1e-3);
    }
    EXPECT_NEAR(sum, 1.0, 1e-9);
    EXPECT_LT(worst, 0.5 * kLogRange / 65535 + 1e-5) << "row " << r;
  }
  EXPECT_FALSE((*reader)->next_row().ok());  // no row past the last

  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 1);
  auto cut = KldBaseReader::open(path);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("truncated or not this format"), std::string::npos) << cut.status().message();
}

TEST(KldBaseFile, WriterCountsItsRows) {
  testing::TempDir dir;
  KldBaseHeader header{.n_vocab = 4, .n_ctx = 8, .n_chunks = 1, .tokens = std::vector<int32_t>(8, 1)};
  auto writer = KldBaseWriter::create(dir.file("b.kld"), header);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->add_row(std::vector<float>{1, 2, 3, 4}).ok());
  EXPECT_FALSE((*writer)->add_row(std::vector<float>{1, 2, 3}).ok());  // not n_vocab
  const Status early = (*writer)->finish();
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.message().find("1 rows written, expected 3"), std::string::npos) << early.message();
}

TEST(KldBaseFile, RefusesBadHeaders) {
  const auto refuse = [](std::vector<uint8_t> bytes, const char* expected) {
    auto reader = KldBaseReader::parse(std::move(bytes), "x.kld");
    ASSERT_FALSE(reader.ok());
    EXPECT_NE(reader.status().message().find(expected), std::string::npos) << reader.status().message();
  };
  refuse({'G', 'G', 'U', 'F'}, "not a KL-divergence base file");
  std::vector<uint8_t> header = {'R', 'E', 'V', 'I', 'S', 'K', 'L', 'D', 1, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0};
  std::vector<uint8_t> file = header;
  for (int32_t t : {0, 1, 2, 9})  // 9: outside the vocabulary of 4
    for (int b = 0; b < 4; ++b) file.push_back(static_cast<uint8_t>(t >> (8 * b)));
  file.resize(file.size() + 12 + 8);
  refuse(file, "token 3 is 9");
  header[8] = 2;
  refuse(header, "version 2");
}

// Bytes in the layout llama-perplexity writes (tools/kld_base_file.h).
struct LlamaCppBytes {
  std::vector<uint8_t> bytes = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
  template <typename T>
  LlamaCppBytes& add(T value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    bytes.insert(bytes.end(), p, p + sizeof value);
    return *this;
  }
};

TEST(KldBaseFile, ReadsLlamaCppsLayout) {
  // n_ctx 4 (one scored position a chunk), n_vocab 3 (rows padded to 4 u16), 2 chunks.
  LlamaCppBytes file;
  file.add(int32_t{4}).add(int32_t{3}).add(int32_t{2});
  for (int32_t t : {0, 2, 1, 1, 2, 0, 0, 1}) file.add(t);
  const float scale = 16.0f / 65535, min = -16.5f;
  file.add(scale).add(min);
  for (uint16_t q : {0, 65535, 1000, 7}) file.add(q);  // 7: the padding, not a token
  file.add(0.0f).add(-std::log(3.0f));                  // all equal: scale 0, every q 0
  for (uint16_t q : {0, 0, 0, 0}) file.add(q);
  auto reader = KldBaseReader::parse(file.bytes, "l.kld");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const KldBaseHeader& h = (*reader)->header();
  EXPECT_EQ(h.n_ctx, 4);
  EXPECT_EQ(h.n_vocab, 3);
  EXPECT_EQ(h.n_chunks, 2);
  EXPECT_EQ(h.tokens, (std::vector<int32_t>{0, 2, 1, 1, 2, 0, 0, 1}));
  auto row = (*reader)->next_row();
  ASSERT_TRUE(row.ok()) << row.status().message();
  EXPECT_EQ(row->top, 1);
  ASSERT_EQ(row->log_probs.size(), 3u);
  EXPECT_NEAR(row->log_probs[0], -16.5, 1e-6);
  EXPECT_NEAR(row->log_probs[1], -0.5, 1e-5);
  EXPECT_NEAR(row->log_probs[2], -16.5 + 1000 * 16.0 / 65535, 1e-5);
  EXPECT_EQ(row->weightless_at_or_below, -16.0);  // llama-perplexity's cut: entry 0 weighs nothing
  auto uniform = (*reader)->next_row();
  ASSERT_TRUE(uniform.ok()) << uniform.status().message();
  EXPECT_EQ(uniform->top, 0);  // the first of equals, as llama-perplexity picks it
  for (double v : uniform->log_probs) EXPECT_NEAR(v, -std::log(3.0), 1e-6);
  EXPECT_FALSE((*reader)->next_row().ok());

  // A row that is not log-probabilities; a file cut short.
  std::vector<uint8_t> positive = file.bytes;
  const float above = 1.0f;
  std::memcpy(positive.data() + positive.size() - 12, &above, sizeof above);  // the second row's min
  auto bad = KldBaseReader::parse(positive, "l.kld");
  ASSERT_TRUE(bad.ok());
  ASSERT_TRUE((*bad)->next_row().ok());
  const auto second = (*bad)->next_row();
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("l.kld (llama-perplexity's layout): row 1 has scale 0"), std::string::npos)
      << second.status().message();
  std::vector<uint8_t> cut = file.bytes;
  cut.pop_back();
  auto short_file = KldBaseReader::parse(cut, "l.kld");
  ASSERT_FALSE(short_file.ok());
  EXPECT_NE(short_file.status().message().find("l.kld (llama-perplexity's layout): 83 bytes, expected 84"),
            std::string::npos)
      << short_file.status().message();
}

TEST(KldBaseFile, RefusesHostileLlamaCppHeaders) {
  const auto refuse = [](int32_t n_ctx, int32_t n_vocab, int32_t n_chunks, const char* expected) {
    LlamaCppBytes file;
    file.add(n_ctx).add(n_vocab).add(n_chunks);
    auto reader = KldBaseReader::parse(file.bytes, "h.kld");
    ASSERT_FALSE(reader.ok());
    EXPECT_NE(reader.status().message().find(expected), std::string::npos) << reader.status().message();
  };
  refuse(512, -1, 4, "h.kld (llama-perplexity's layout): n_vocab -1, expected 1 .. 2^24");
  refuse(2, 2048, 4, "n_ctx 2, expected 3 .. 2^24");
  refuse(512, 2048, 0, "n_chunks 0, expected 1 .. 2^24");
  refuse(512, 2048, INT32_MIN, "n_chunks -2147483648");
  // Each in range, their product past any file: refused, not wrapped round.
  refuse(1 << 24, 1 << 24, 1 << 24, "make more than 2^64 bytes");
  refuse(512, 2048, 4, "20 bytes, expected 4194292 for n_chunks 4 of n_ctx 512 tokens over n_vocab 2048");
  // revis's layout through the same checks: n_vocab 2^24 + 1.
  auto revis_layout = KldBaseReader::parse(
      {'R', 'E', 'V', 'I', 'S', 'K', 'L', 'D', 1, 0, 0, 0, 1, 0, 0, 1, 64, 0, 0, 0, 1, 0, 0, 0}, "r.kld");
  ASSERT_FALSE(revis_layout.ok());
  EXPECT_NE(revis_layout.status().message().find("r.kld: n_vocab 16777217, expected 1 .. 2^24"), std::string::npos)
      << revis_layout.status().message();
}

}  // namespace
}  // namespace revis
