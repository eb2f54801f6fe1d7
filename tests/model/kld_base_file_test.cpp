// The KL-divergence base file: rows written from logits read back as the
// log-softmax within the format's resolution, with the exact top token,
// and a file that is cut short or not of this format is refused.
#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
}  // namespace revis
