// KvStore: the index rebuilt from the directory, loads that reject damage,
// and eviction by value under a budget, with a clock the test controls.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kvstore/store.h"
#include "row_buffer.h"
#include "support/testdata.h"

namespace revis::kvstore {
namespace {

using testing::TempDir;
using Tokens = std::vector<int32_t>;

constexpr uint64_t kModel = 0xfeedull;
const KvShape kShape{.n_layer = 1, .n_head_kv = 1, .head_dim_k = 4, .head_dim_v = 4};
constexpr double kHalfLife = 100.0;

Tokens tokens(int first, int n) {
  Tokens t(n);
  for (int i = 0; i < n; ++i) t[i] = first + i;
  return t;
}


struct Fixture {
  TempDir tmp;
  double now = 1000.0;
  std::unique_ptr<KvStore> open(uint64_t budget = 0, uint64_t model = kModel) {
    auto s = KvStore::open({.dir = tmp.path().string(), .budget_bytes = budget, .half_life_s = kHalfLife,
                            .clock = [this] { return now; }},
                           model, kShape);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }
  static void save(KvStore& store, const Tokens& t) {
    RowBuffer rows(kShape, t.size());
    rows.fill(static_cast<int>(t.size()));
    CheckpointHeader header;
    const Status s = store.save(header, {.tokens = t, .logits = {1.0f, 2.0f}}, rows.runs);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  // Loads an entry into rows of its size.
  static Result<CheckpointContents> load(KvStore& store, const StoreEntry& e) {
    RowBuffer rows(kShape, e.tokens.size());
    return store.load(e, rows.runs);
  }
  static uint64_t file_bytes(int n_tokens) {  // header + tokens + 2 logits + rows
    return 128 + n_tokens * 4 + 8 + n_tokens * kShape.bytes_per_token();
  }
};

TEST(KvStore, RebuildsItsIndexFromTheDirectory) {
  Fixture f;
  {
    auto store = f.open();
    Fixture::save(*store, tokens(0, 100));
    Fixture::save(*store, tokens(0, 200));
    Fixture::save(*store, tokens(5000, 50));
  }
  {  // Another model's checkpoint and a damaged file in the same directory.
    auto other = f.open(0, kModel + 1);
    Fixture::save(*other, tokens(0, 300));
    std::ofstream(f.tmp.file("broken.rkv")) << "not a checkpoint";
  }
  auto store = f.open();
  EXPECT_EQ(store->entries().size(), 4u) << "other models' files are listed (and count towards the budget)";
  ASSERT_EQ(store->scan_problems().size(), 1u);
  EXPECT_NE(store->scan_problems()[0].find("broken.rkv"), std::string::npos);

  Tokens prompt = tokens(0, 150);
  prompt.push_back(-1);
  auto m = store->longest_common(prompt);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->common, 150);
  EXPECT_EQ(m->entry->tokens.size(), 200u) << "the 300-token file is another model's";
  EXPECT_TRUE(store->contains(tokens(0, 100)));
  EXPECT_FALSE(store->contains(tokens(0, 300)));
  auto loaded = Fixture::load(*store, *m->entry);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->tokens, tokens(0, 200));
}

TEST(KvStore, ADamagedFileIsDroppedAtLoad) {
  Fixture f;
  auto store = f.open();
  Fixture::save(*store, tokens(0, 100));
  const StoreEntry* e = store->longest_common(tokens(0, 100))->entry;
  const std::string path = f.tmp.file(e->file);
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-3, std::ios::end);
    file.put('\x7f');
  }
  auto loaded = Fixture::load(*store, *e);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("checksum"), std::string::npos) << loaded.status().message();
  EXPECT_FALSE(store->longest_common(tokens(0, 100)));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(store->total_bytes(), 0u);
}

TEST(KvStore, EvictionKeepsTheBudgetAndTheValuableEntries) {
  Fixture f;
  const uint64_t budget = 3 * Fixture::file_bytes(100);
  auto store = f.open(budget);
  const Tokens popular = tokens(0, 100), idle = tokens(1000, 100), recent = tokens(2000, 100);
  Fixture::save(*store, popular);
  Fixture::save(*store, idle);
  for (int i = 0; i < 5; ++i) {
    f.now += 1;
    store->record_hit(*store->longest_common(popular)->entry, 100);
  }
  f.now += 10;
  Fixture::save(*store, recent);
  EXPECT_EQ(store->total_bytes(), budget);

  // A fourth file does not fit: the entry nobody used goes.
  f.now += 1;
  Fixture::save(*store, tokens(3000, 100));
  EXPECT_LE(store->total_bytes(), budget);
  EXPECT_TRUE(store->contains(popular));
  EXPECT_FALSE(store->contains(idle));
  EXPECT_TRUE(store->contains(recent));

  // Hits fade: ten half-lives later, unused since, the popular entry first
  // outlives the entries as old as it with fewer hits, then loses to new ones.
  f.now += 10 * kHalfLife;
  Fixture::save(*store, tokens(4000, 100));
  f.now += 1;
  Fixture::save(*store, tokens(5000, 100));
  EXPECT_TRUE(store->contains(popular));
  EXPECT_FALSE(store->contains(recent));
  f.now += 1;
  Fixture::save(*store, tokens(6000, 100));
  EXPECT_FALSE(store->contains(popular));
  for (int first : {4000, 5000, 6000}) EXPECT_TRUE(store->contains(tokens(first, 100))) << first;
  EXPECT_LE(store->total_bytes(), budget);
}

// A hit on a long checkpoint counts for the shorter one it extends, so the
// shared prefix survives where an equally long unrelated one does not.
TEST(KvStore, HitsOnLongerCheckpointsKeepTheirAncestors) {
  Fixture f;
  const Tokens system = tokens(0, 64), unrelated = tokens(7000, 64);
  Tokens conversation = system;
  for (int i = 0; i < 64; ++i) conversation.push_back(9000 + i);
  const uint64_t budget = 2 * Fixture::file_bytes(64) + Fixture::file_bytes(128);
  auto store = f.open(budget);
  Fixture::save(*store, system);  // the oldest: without the credit it would go first
  f.now += 1;
  Fixture::save(*store, unrelated);
  f.now += 1;
  Fixture::save(*store, conversation);
  for (int i = 0; i < 3; ++i) {
    f.now += 1;
    store->record_hit(*store->longest_common(conversation)->entry, 128);
  }
  const StoreEntry* ancestor = store->longest_common(system)->entry;
  ASSERT_EQ(ancestor->tokens, system);
  EXPECT_GT(ancestor->hits, 3.0);

  f.now += 1;
  Fixture::save(*store, tokens(8000, 64));
  EXPECT_TRUE(store->contains(system));
  EXPECT_TRUE(store->contains(conversation));
  EXPECT_FALSE(store->contains(unrelated));
}

TEST(KvStore, RecencySurvivesARestartThroughTheFileTime) {
  Fixture f;
  {
    auto store = f.open();
    Fixture::save(*store, tokens(0, 10));
    f.now = 5000;
    store->record_hit(*store->longest_common(tokens(0, 10))->entry, 10);
  }
  auto store = f.open();
  EXPECT_DOUBLE_EQ(store->longest_common(tokens(0, 10))->entry->last_used, 5000);
}

TEST(KvStore, PrefixDigestsAreAlignedAndStable) {
  Fixture f;
  auto store = f.open();
  Fixture::save(*store, tokens(0, 130));
  const std::vector<std::string> digests = store->prefix_digests(64, 10);
  ASSERT_EQ(digests.size(), 2u);  // 128 then 64 tokens
  EXPECT_EQ(digests[0], KvStore::prefix_digest(kModel, tokens(0, 128)));
  EXPECT_EQ(digests[1], KvStore::prefix_digest(kModel, tokens(0, 64)));
  EXPECT_NE(KvStore::prefix_digest(kModel + 1, tokens(0, 64)), digests[1]) << "the model is part of the digest";
  EXPECT_EQ(store->prefix_digests(64, 1).size(), 1u);
  // A prompt that starts like the checkpoint: its aligned digests, shortest
  // first, meet the published ones where they share tokens.
  std::vector<int32_t> prompt = tokens(0, 128);
  prompt.insert(prompt.end(), 70, 7);
  const std::vector<std::string> mine = KvStore::aligned_prefix_digests(kModel, prompt, 64);
  ASSERT_EQ(mine.size(), 3u) << "198 tokens: prefixes of 64, 128 and 192";
  EXPECT_EQ(mine[0], digests[1]);
  EXPECT_EQ(mine[1], digests[0]);
  EXPECT_EQ(std::count(digests.begin(), digests.end(), mine[2]), 0);
}

TEST(KvStore, ACheckpointPublishesOnlyThePrefixesItResumesFrom) {
  TempDir tmp;
  KvShape shape = kShape;
  shape.recurrent_bytes = 8 * sizeof(float);
  auto store = KvStore::open({.dir = tmp.path().string()}, kModel, shape);
  ASSERT_TRUE(store.ok()) << store.status().message();
  const Tokens t = tokens(0, 200);
  RowBuffer rows(shape, t.size());
  rows.fill(static_cast<int>(t.size()));
  const std::vector<float> state(8, 0.5f);
  CheckpointHeader header;
  ASSERT_TRUE((*store)->save(header, {.tokens = t, .logits = {}}, rows.runs, state).ok());
  // Its state stands after token 200: a prompt sharing 64 or 128 of its
  // tokens would prefill from the start, so only 192 is published.
  const std::vector<std::string> digests = (*store)->prefix_digests(64, 10, 0);
  ASSERT_EQ(digests.size(), 1u);
  EXPECT_EQ(digests[0], KvStore::prefix_digest(kModel, tokens(0, 192)));
  // With resume points every 128 tokens (deepseek4), 128 serves too.
  const std::vector<std::string> points = (*store)->prefix_digests(64, 10, 128);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[1], KvStore::prefix_digest(kModel, tokens(0, 128)));
}

}  // namespace
}  // namespace revis::kvstore
