// The checkpoint file format: what is written reads back, and every kind of
// damage or mismatch is rejected with a message naming the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kvstore/checkpoint_file.h"
#include "kvstore/checksum.h"
#include "row_buffer.h"
#include "support/testdata.h"

namespace revis::kvstore {
namespace {

using testing::TempDir;

constexpr uint64_t kModel = 0x1234abcd5678ef00ull;
const KvShape kShape{.n_layer = 2, .n_head_kv = 2, .head_dim_k = 8, .head_dim_v = 4};

// A checkpoint's contents and its rows, as a session would hand them over.
struct Source {
  Source(int n_tokens, int seed, size_t capacity = 0) : rows(kShape, capacity ? capacity : n_tokens) {
    header.model = kModel;
    header.shape = kShape;
    header.writer = "revis test";
    for (int i = 0; i < n_tokens; ++i) contents.tokens.push_back(seed * 1000 + i);
    for (int i = 0; i < 32; ++i) contents.logits.push_back(static_cast<float>(seed) - 0.25f * i);
    rows.fill(seed);
  }
  Status write(const std::string& path) { return write_checkpoint(path, header, contents, rows.runs); }
  CheckpointHeader header;
  CheckpointContents contents;
  RowBuffer rows;
};

Result<CheckpointContents> read_into(const std::string& path, RowBuffer& rows, uint64_t model = kModel,
                                     const KvShape& shape = kShape) {
  return read_checkpoint_into(path, model, shape, rows.runs);
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

TEST(Checksum, IsXxh3AndStreamsAsOneRange) {
  // XXH3-64 of no bytes with seed 0 (the reference implementation's test vector).
  EXPECT_EQ(checksum64(nullptr, 0), 0x2d06800538d394c2ull);
  std::vector<uint8_t> bytes(5000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + (i >> 8));
  for (size_t split : {size_t{0}, size_t{1}, size_t{63}, size_t{240}, size_t{1025}, size_t{4999}}) {
    StreamingChecksum sum;
    sum.update(bytes.data(), split);
    sum.update(bytes.data() + split, bytes.size() - split);
    EXPECT_EQ(sum.digest(), checksum64(bytes.data(), bytes.size())) << "split at " << split;
  }
}

TEST(CheckpointFile, RoundTrips) {
  TempDir tmp;
  Source source(5, 3, 9);  // rows kept in runs of 9 positions, 5 of them written
  const std::string path = tmp.file("a.rkv");
  ASSERT_TRUE(source.write(path).ok());
  RowBuffer rows(kShape, 12);
  auto back = read_into(path, rows);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tokens, source.contents.tokens);
  EXPECT_EQ(back->logits, source.contents.logits);
  EXPECT_TRUE(rows.same_rows(source.rows, 5));
  auto summary = read_checkpoint_summary(path);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->tokens, source.contents.tokens);
  EXPECT_EQ(summary->header.writer, "revis test");
  EXPECT_TRUE(summary->header.has_logits);
  EXPECT_EQ(summary->header.version, 2u);
  EXPECT_EQ(summary->file_bytes, std::filesystem::file_size(path));
  // Nothing but the file itself is left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp.path()), {}), 1);
}

// The bytes on disk are the documented layout: header, token ids, logits,
// then each run's first n positions, run after run.
TEST(CheckpointFile, LaysRowsOutRunAfterRun) {
  TempDir tmp;
  Source source(7, 4, 10);
  ASSERT_TRUE(source.write(tmp.file("a.rkv")).ok());
  std::vector<uint8_t> expected(kCheckpointHeaderBytes);
  auto append = [&](const void* p, size_t n) {
    expected.insert(expected.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  append(source.contents.tokens.data(), 7 * sizeof(int32_t));
  append(source.contents.logits.data(), source.contents.logits.size() * sizeof(float));
  for (const KvRun& r : source.rows.runs) append(r.data, 7 * r.bytes_per_position);
  std::vector<uint8_t> bytes = read_all(tmp.file("a.rkv"));
  ASSERT_EQ(bytes.size(), expected.size());
  EXPECT_TRUE(std::equal(bytes.begin() + kCheckpointHeaderBytes, bytes.end(), expected.begin() + kCheckpointHeaderBytes));
  EXPECT_EQ(checksum64(bytes.data() + kCheckpointHeaderBytes, bytes.size() - kCheckpointHeaderBytes),
            read_checkpoint_summary(tmp.file("a.rkv"))->header.payload_checksum);
}

// A checkpoint longer than the runs that receive it (a session with a
// shorter context): what fits lands, the rest is checked and dropped.
TEST(CheckpointFile, ReadsIntoShorterRuns) {
  TempDir tmp;
  Source source(9, 5);
  ASSERT_TRUE(source.write(tmp.file("a.rkv")).ok());
  RowBuffer rows(kShape, 6);
  auto back = read_into(tmp.file("a.rkv"), rows);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tokens.size(), 9u);
  EXPECT_TRUE(rows.same_rows(source.rows, 6));
}

// Big enough for several read chunks and a run split between two of them.
TEST(CheckpointFile, RoundTripsAcrossChunks) {
  TempDir tmp;
  const KvShape wide{.n_layer = 4, .n_head_kv = 4, .head_dim_k = 128, .head_dim_v = 128};
  Source source(1, 1);
  source.header.shape = wide;
  for (int i = 1; i < 3000; ++i) source.contents.tokens.push_back(i);
  RowBuffer big(wide, 3001);
  big.fill(9);
  ASSERT_TRUE(write_checkpoint(tmp.file("a.rkv"), source.header, source.contents, big.runs).ok());
  RowBuffer rows(wide, 3000);
  ReadTimings timings;
  auto back = read_checkpoint_into(tmp.file("a.rkv"), kModel, wide, rows.runs, {}, &timings);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(rows.same_rows(big, 3000));
  EXPECT_EQ(timings.bytes, std::filesystem::file_size(tmp.file("a.rkv")));
  EXPECT_GT(timings.bytes, 3 * (size_t{4} << 20)) << "several chunks";
}

TEST(CheckpointFile, WithoutLogits) {
  TempDir tmp;
  Source source(3, 1);
  source.contents.logits.clear();
  ASSERT_TRUE(source.write(tmp.file("a.rkv")).ok());
  RowBuffer rows(kShape, 3);
  auto back = read_into(tmp.file("a.rkv"), rows);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_FALSE(read_checkpoint_summary(tmp.file("a.rkv"))->header.has_logits);
  EXPECT_TRUE(back->logits.empty());
}

void expect_rejected(const std::string& path, const std::string& why, uint64_t model = kModel,
                     KvShape shape = kShape) {
  RowBuffer rows(shape, 6);
  auto r = read_checkpoint_into(path, model, shape, rows.runs);
  ASSERT_FALSE(r.ok()) << "accepted, expected: " << why;
  EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(path), std::string::npos) << "names the file: " << r.status().message();
}

class DamagedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(source.write(path).ok());
    bytes = read_all(path);
  }
  TempDir tmp;
  std::string path = tmp.file("c.rkv");
  Source source{6, 2};
  std::vector<uint8_t> bytes;
};

// One byte flipped in every region of the file: the header's fields and its
// checksum, the token ids, the logits, the first and last byte of every run
// of rows, the last byte of the file. Each is refused, with a message naming
// the file and the damage.
TEST_F(DamagedCheckpoint, EveryRegionIsChecked) {
  struct Region {
    size_t at;
    std::string why;
  };
  std::vector<Region> regions = {{0, "not a revis KV checkpoint"},
                                 {12, "header checksum mismatch"},  // header size
                                 {16, "header checksum mismatch"},  // model
                                 {44, "header checksum mismatch"},  // token count
                                 {56, "header checksum mismatch"},  // payload size
                                 {64, "header checksum mismatch"},  // payload checksum
                                 {80, "header checksum mismatch"},  // writer
                                 {110, "header checksum mismatch"},  // reserved
                                 {121, "header checksum mismatch"},  // the header checksum itself
                                 {128 + 1, "payload checksum mismatch"},  // token ids
                                 {128 + 6 * 4 + 5, "payload checksum mismatch"}};  // logits
  size_t at = 128 + 6 * 4 + 32 * 4;
  for (const KvRun& r : source.rows.runs) {
    regions.push_back({at, "payload checksum mismatch"});
    at += 6 * r.bytes_per_position;
    regions.push_back({at - 1, "payload checksum mismatch"});
  }
  ASSERT_EQ(at, bytes.size());
  for (const Region& region : regions) {
    SCOPED_TRACE("byte " + std::to_string(region.at));
    std::vector<uint8_t> damaged = bytes;
    damaged[region.at] ^= 0x10;
    write_all(path, damaged);
    expect_rejected(path, region.why);
  }
}

TEST_F(DamagedCheckpoint, Truncated) {
  const size_t rows_at = 128 + 6 * 4 + 32 * 4;
  for (size_t keep : {bytes.size() - 1, bytes.size() / 2, rows_at + 1, rows_at, size_t{128 + 6 * 4 + 3}, size_t{130},
                      size_t{128}, size_t{100}, size_t{0}}) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " bytes");
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

TEST_F(DamagedCheckpoint, OlderVersion) {
  bytes[8] = 1;  // version 1: revis's own checksum, before XXH3
  write_all(path, bytes);
  expect_rejected(path, "format version 1, this build reads version 2");
  expect_rejected(path, "`revis kv gc` removes it");
}

TEST_F(DamagedCheckpoint, OtherVersion) {
  bytes[8] = 5;  // a future format; its header checksum may be defined differently
  write_all(path, bytes);
  expect_rejected(path, "format version 5, this build reads versions 2 to 4");
}

// A hybrid model's checkpoint: its recurrent state follows the rows, once,
// in a version 3 file whose header gives its size; the payload checksum
// covers it, and a file cut short of it is truncated.
// A header for kModel with `shape`, and contents of n tokens from `first`
// with 32 logits of `logit`.
CheckpointHeader header_with(const KvShape& shape) {
  CheckpointHeader h;
  h.model = kModel;
  h.shape = shape;
  return h;
}
CheckpointContents contents_of(int n, int32_t first, float logit) {
  CheckpointContents c;
  for (int i = 0; i < n; ++i) c.tokens.push_back(first + i);
  c.logits.assign(32, logit);
  return c;
}

class RecurrentCheckpoint : public ::testing::Test {
 protected:
  static KvShape shape() {
    KvShape s = kShape;
    s.recurrent_bytes = 24 * sizeof(float);
    return s;
  }
  void SetUp() override {
    rows.fill(3);
    for (int i = 0; i < 24; ++i) state.push_back(0.125f * i - 1.0f);
    ASSERT_TRUE(write_checkpoint(path, header, contents, rows.runs, state).ok());
    bytes = read_all(path);
  }
  Result<CheckpointContents> read(std::vector<float>& into) {
    RowBuffer back(shape(), 5);
    return read_checkpoint_into(path, kModel, shape(), back.runs, into);
  }
  TempDir tmp;
  std::string path = tmp.file("r.rkv");
  CheckpointHeader header = header_with(shape());
  CheckpointContents contents = contents_of(5, 100, 0.5f);
  RowBuffer rows{shape(), 5};
  std::vector<float> state;
  std::vector<uint8_t> bytes;
};

TEST_F(RecurrentCheckpoint, HoldsTheStateAfterTheRows) {
  EXPECT_EQ(bytes[8], 3) << "format version 3";
  EXPECT_EQ(bytes[108], 24 * sizeof(float)) << "the state's size in the header";
  ASSERT_EQ(bytes.size(), 128 + 5 * 4 + 32 * 4 + 5 * kShape.bytes_per_token() + 24 * sizeof(float));
  EXPECT_EQ(std::memcmp(bytes.data() + bytes.size() - 24 * sizeof(float), state.data(), 24 * sizeof(float)), 0);
  std::vector<float> back(24, 0.0f);
  auto r = read(back);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(back, state);
  EXPECT_EQ(read_checkpoint_summary(path)->header.shape, shape());
}

TEST_F(RecurrentCheckpoint, ItsStateIsChecked) {
  std::vector<float> back(24);
  for (size_t at : {bytes.size() - 1, bytes.size() - 24 * sizeof(float)}) {
    std::vector<uint8_t> damaged = bytes;
    damaged[at] ^= 0x04;
    write_all(path, damaged);
    auto r = read(back);
    ASSERT_FALSE(r.ok()) << "byte " << at;
    EXPECT_NE(r.status().message().find("payload checksum mismatch"), std::string::npos) << r.status().message();
  }
  write_all(path, std::vector<uint8_t>(bytes.begin(), bytes.end() - 4));
  auto cut = read(back);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status().message();
}

TEST_F(RecurrentCheckpoint, NeedsRoomForTheState) {
  std::vector<float> small(23);
  auto r = read(small);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a recurrent state of 92 bytes, the KV shape has 96"), std::string::npos)
      << r.status().message();
  // And a model without one reads none: another shape.
  expect_rejected(path, "does not match the model's", kModel, kShape);
}

// deepseek4's checkpoint (version 4): runs of compact compressor rows after
// the heads' (state_bytes per position, a run's rows each covering several
// positions), then its compressors' tail once. Bytes of a row that a
// position past the checkpoint's end completes are stored as zeros, so a
// save never reads what a session goes on writing. Every region is
// checked, and a file cut short anywhere is truncated.
class CompressorCheckpoint : public ::testing::Test {
 protected:
  static constexpr size_t kStride = 4, kRowBytes = 12;  // 3 bytes per position
  static KvShape shape() {
    KvShape s = kShape;
    s.state_bytes = kRowBytes / kStride;
    s.recurrent_bytes = 8 * sizeof(float);
    return s;
  }
  struct Rows {
    RowBuffer heads{kShape, 10};
    std::vector<uint8_t> keys = std::vector<uint8_t>(10 * kRowBytes / kStride);
    std::vector<float> tail = std::vector<float>(8);
    std::vector<KvRun> runs() {
      std::vector<KvRun> r = heads.runs;
      r.push_back({keys.data(), kRowBytes / kStride, 10, kStride});
      return r;
    }
  };
  void SetUp() override {
    saved.heads.fill(9);
    for (size_t i = 0; i < saved.keys.size(); ++i) saved.keys[i] = static_cast<uint8_t>(i + 1);
    for (int i = 0; i < 8; ++i) saved.tail[i] = 0.5f * i;
    ASSERT_TRUE(write_checkpoint(path, header, contents, saved.runs(), saved.tail).ok());
    bytes = read_all(path);
  }
  Result<CheckpointContents> read(Rows& into) {
    return read_checkpoint_into(path, kModel, shape(), into.runs(), into.tail);
  }
  TempDir tmp;
  std::string path = tmp.file("d.rkv");
  CheckpointHeader header = header_with(shape());
  CheckpointContents contents = contents_of(7, 40, 0.25f);
  Rows saved;
  std::vector<uint8_t> bytes;
};

TEST_F(CompressorCheckpoint, IsVersion4WithWholeRowsAndTheTail) {
  EXPECT_EQ(bytes[8], 4) << "format version 4";
  const size_t keys_at = 128 + 7 * 4 + 32 * 4 + 7 * kShape.bytes_per_token();
  ASSERT_EQ(bytes.size(), keys_at + 7 * kRowBytes / kStride + 8 * sizeof(float));
  // 7 positions: the row of positions 0..3 whole, then zeros for 4..6 (its
  // row is completed at position 7).
  EXPECT_TRUE(std::equal(saved.keys.begin(), saved.keys.begin() + kRowBytes, bytes.begin() + keys_at));
  EXPECT_TRUE(std::all_of(bytes.begin() + keys_at + kRowBytes, bytes.begin() + keys_at + 7 * kRowBytes / kStride,
                          [](uint8_t b) { return b == 0; }));
  Rows back;
  auto r = read(back);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(back.heads.same_rows(saved.heads, 7));
  EXPECT_TRUE(std::equal(saved.keys.begin(), saved.keys.begin() + kRowBytes, back.keys.begin()));
  EXPECT_EQ(back.tail, saved.tail);
}

TEST_F(CompressorCheckpoint, DamageAndTruncationAreRefused) {
  Rows back;
  for (size_t at : {size_t{104}, size_t{108}, bytes.size() - 8 * sizeof(float) - 1, bytes.size() - 1}) {
    SCOPED_TRACE("byte " + std::to_string(at));
    std::vector<uint8_t> damaged = bytes;
    damaged[at] ^= 0x20;
    write_all(path, damaged);
    auto r = read(back);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(at < 128 ? "header checksum mismatch" : "payload checksum mismatch"),
              std::string::npos)
        << r.status().message();
  }
  for (size_t keep : {bytes.size() - 1, bytes.size() - 8 * sizeof(float), bytes.size() / 2, size_t{128}}) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " bytes");
    write_all(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + keep));
    auto r = read(back);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  }
}

// A deepseek4 checkpoint of an earlier build (version 2, its compressor
// planes per position) is refused by name, not converted: a checkpoint is
// a cache, and `revis kv gc` removes it.
TEST_F(CompressorCheckpoint, AnEarlierBuildsPerPositionPlanesAreRefused) {
  bytes[8] = 2;
  for (int i = 108; i < 112; ++i) bytes[i] = 0;  // version 2 had no state after the rows
  const uint64_t sum = checksum64(bytes.data(), 120);
  for (int i = 0; i < 8; ++i) bytes[120 + i] = static_cast<uint8_t>(sum >> (8 * i));
  write_all(path, bytes);
  auto summary = read_checkpoint_summary(path);
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("format version 2 with per-position state planes"), std::string::npos)
      << summary.status().message();
  EXPECT_NE(summary.status().message().find("`revis kv gc` removes it"), std::string::npos);
}

// Files of models without recurrent layers stay version 2, which earlier
// builds read.
TEST_F(DamagedCheckpoint, WithoutAStateStaysVersion2) {
  EXPECT_EQ(bytes[8], 2);
  EXPECT_EQ(bytes[108], 0);
}

TEST_F(DamagedCheckpoint, OtherModel) { expect_rejected(path, "written for model", kModel + 1); }

TEST_F(DamagedCheckpoint, OtherShape) {
  KvShape other = kShape;
  other.n_head_kv = 4;
  expect_rejected(path, "does not match the model's", kModel, other);
}

TEST(CheckpointFile, RejectsMismatchedRows) {
  TempDir tmp;
  Source source(4, 1);
  source.rows.runs.pop_back();  // one run short of the shape
  const Status s = source.write(tmp.file("x.rkv"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bytes per position"), std::string::npos) << s.message();
  Source short_runs(4, 1, 3);
  short_runs.rows.runs[0].positions = 3;
  EXPECT_FALSE(short_runs.write(tmp.file("x.rkv")).ok()) << "4 tokens, 3 positions of rows";
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
        Source source(64 + round, t % 3);
        source.rows.bytes[0] = static_cast<uint8_t>(t);
        const std::string name = checkpoint_file_name(kModel, source.contents.tokens);
        if (!source.write(tmp.file(name)).ok()) ++failures;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  int files = 0;
  for (const auto& d : std::filesystem::directory_iterator(tmp.path())) {
    ++files;
    EXPECT_EQ(d.path().extension(), ".rkv") << "left behind: " << d.path();
    RowBuffer rows(kShape, 64 + kRounds);
    auto c = read_into(d.path().string(), rows);
    EXPECT_TRUE(c.ok()) << c.status().message();
  }
  EXPECT_EQ(files, 3 * kRounds);
}

}  // namespace
}  // namespace revis::kvstore
