// The checkpoint file format: what is written reads back, and every kind of
// damage or mismatch is rejected with a message naming the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "kvstore/checkpoint_file.h"
#include "kvstore/checksum.h"
#include "support/testdata.h"

namespace revis::kvstore {
namespace {

using testing::TempDir;

constexpr uint64_t kModel = 0x1234abcd5678ef00ull;
const KvShape kShape{.n_layer = 2, .n_head_kv = 2, .head_dim_k = 8, .head_dim_v = 4};

Checkpoint make_checkpoint(int n_tokens, int seed) {
  Checkpoint c;
  c.header.model = kModel;
  c.header.shape = kShape;
  c.header.writer = "revis test";
  for (int i = 0; i < n_tokens; ++i) c.tokens.push_back(seed * 1000 + i);
  c.logits.assign(32, 0.0f);
  for (size_t i = 0; i < c.logits.size(); ++i) c.logits[i] = static_cast<float>(seed) - 0.25f * i;
  c.kv.resize(n_tokens * kShape.bytes_per_token());
  for (size_t i = 0; i < c.kv.size(); ++i) c.kv[i] = static_cast<uint8_t>(i * 7 + seed);
  return c;
}

std::vector<uint8_t> read_all(const std::string& path) { return testing::read_bytes(path); }
void write_all(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

TEST(Checksum, DependsOnEveryByteAndTheLength) {
  std::vector<uint8_t> bytes(100, 7);
  const uint64_t base = checksum64(bytes.data(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] ^= 1;
    EXPECT_NE(checksum64(bytes.data(), bytes.size()), base) << "byte " << i;
    bytes[i] ^= 1;
  }
  EXPECT_NE(checksum64(bytes.data(), 99), checksum64(bytes.data(), 100));
  EXPECT_NE(checksum64(bytes.data(), 100, 1), base);
  EXPECT_EQ(checksum64(bytes.data(), 100), base);
}

TEST(CheckpointFile, RoundTrips) {
  TempDir tmp;
  Checkpoint c = make_checkpoint(5, 3);
  const std::string path = tmp.file("a.rkv");
  ASSERT_TRUE(write_checkpoint(path, c).ok());
  auto back = read_checkpoint(path, kModel, kShape);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tokens, c.tokens);
  EXPECT_EQ(back->logits, c.logits);
  EXPECT_EQ(back->kv, c.kv);
  EXPECT_EQ(back->header.writer, "revis test");
  EXPECT_TRUE(back->header.has_logits);
  auto summary = read_checkpoint_summary(path);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->tokens, c.tokens);
  EXPECT_EQ(summary->file_bytes, std::filesystem::file_size(path));
  // Nothing but the file itself is left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp.path()), {}), 1);
}

TEST(CheckpointFile, WithoutLogits) {
  TempDir tmp;
  Checkpoint c = make_checkpoint(3, 1);
  c.logits.clear();
  ASSERT_TRUE(write_checkpoint(tmp.file("a.rkv"), c).ok());
  auto back = read_checkpoint(tmp.file("a.rkv"), kModel, kShape);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_FALSE(back->header.has_logits);
  EXPECT_TRUE(back->logits.empty());
}

void expect_rejected(const std::string& path, const std::string& why, uint64_t model = kModel,
                     KvShape shape = kShape) {
  auto r = read_checkpoint(path, model, shape);
  ASSERT_FALSE(r.ok()) << "accepted, expected: " << why;
  EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(path), std::string::npos) << "names the file: " << r.status().message();
}

class DamagedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    Checkpoint c = make_checkpoint(6, 2);
    ASSERT_TRUE(write_checkpoint(path, c).ok());
    bytes = read_all(path);
  }
  TempDir tmp;
  std::string path = tmp.file("c.rkv");
  std::vector<uint8_t> bytes;
};

TEST_F(DamagedCheckpoint, FlippedPayloadBit) {
  bytes[bytes.size() - 10] ^= 0x10;
  write_all(path, bytes);
  expect_rejected(path, "payload checksum mismatch");
  EXPECT_TRUE(read_checkpoint_summary(path).ok()) << "the header alone is still fine";
}

TEST_F(DamagedCheckpoint, FlippedTokenBit) {
  bytes[128 + 1] ^= 0x01;
  write_all(path, bytes);
  expect_rejected(path, "payload checksum mismatch");
}

TEST_F(DamagedCheckpoint, Truncated) {
  for (size_t keep : {bytes.size() - 1, bytes.size() / 2, size_t{130}, size_t{100}, size_t{0}}) {
    write_all(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + keep));
    expect_rejected(path, "truncated");
    EXPECT_FALSE(read_checkpoint_summary(path).ok());
  }
}

TEST_F(DamagedCheckpoint, TrailingBytes) {
  bytes.push_back(0);
  write_all(path, bytes);
  expect_rejected(path, "trailing bytes");
}

TEST_F(DamagedCheckpoint, DamagedHeader) {
  bytes[44] ^= 0x01;  // n_tokens
  write_all(path, bytes);
  expect_rejected(path, "header checksum mismatch");
}

TEST_F(DamagedCheckpoint, NotACheckpoint) {
  bytes[0] = 'G';
  write_all(path, bytes);
  expect_rejected(path, "not a revis KV checkpoint");
}

TEST_F(DamagedCheckpoint, OtherVersion) {
  bytes[8] = 2;  // a future format; its header checksum may be defined differently
  write_all(path, bytes);
  expect_rejected(path, "format version 2, this build reads version 1");
}

TEST_F(DamagedCheckpoint, OtherModel) { expect_rejected(path, "written for model", kModel + 1); }

TEST_F(DamagedCheckpoint, OtherShape) {
  KvShape other = kShape;
  other.n_head_kv = 4;
  expect_rejected(path, "does not match the model's", kModel, other);
}

TEST(CheckpointFile, RejectsMismatchedRows) {
  TempDir tmp;
  Checkpoint c = make_checkpoint(4, 1);
  c.kv.pop_back();
  const Status s = write_checkpoint(tmp.file("x.rkv"), c);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(std::filesystem::exists(tmp.file("x.rkv")));
}

// Writers racing on one directory, several of them on the same file name:
// every file ends up whole and valid, and no temporary file is left.
TEST(CheckpointFile, ConcurrentWritersDoNotCorrupt) {
  TempDir tmp;
  constexpr int kThreads = 6, kRounds = 8;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        // Threads t and t+3 write the same prefix (same name, same content
        // size) with different contents: the last rename wins, whole.
        Checkpoint c = make_checkpoint(64 + round, t % 3);
        c.kv[0] = static_cast<uint8_t>(t);
        const std::string name = checkpoint_file_name(kModel, c.tokens);
        if (!write_checkpoint(tmp.file(name), c).ok()) ++failures;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  int files = 0;
  for (const auto& d : std::filesystem::directory_iterator(tmp.path())) {
    ++files;
    EXPECT_EQ(d.path().extension(), ".rkv") << "left behind: " << d.path();
    auto c = read_checkpoint(d.path().string(), kModel, kShape);
    EXPECT_TRUE(c.ok()) << c.status().message();
  }
  EXPECT_EQ(files, 3 * kRounds);
}

}  // namespace
}  // namespace revis::kvstore
