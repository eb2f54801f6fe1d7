// RadixIndex: the longest shared prefix, edge splits and merges, and the
// choice among keys that share as much.
#include <gtest/gtest.h>

#include <random>

#include "kvstore/radix_index.h"

namespace revis::kvstore {
namespace {

using Tokens = std::vector<int32_t>;

TEST(RadixIndex, FindsTheKeySharingTheLongestPrefix) {
  RadixIndex index;
  index.insert(Tokens{1, 2, 3, 4}, 10);
  index.insert(Tokens{1, 2, 5}, 20);
  index.insert(Tokens{7}, 30);
  EXPECT_EQ(index.size(), 3u);

  auto m = index.longest_common(Tokens{1, 2, 3, 4, 9});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->id, 10u);
  EXPECT_EQ(m->common, 4);
  m = index.longest_common(Tokens{1, 2, 3, 8});  // diverges inside the edge {3, 4}
  ASSERT_TRUE(m);
  EXPECT_EQ(m->id, 10u);
  EXPECT_EQ(m->common, 3);
  EXPECT_EQ(m->key_length, 4);
  m = index.longest_common(Tokens{1, 2, 5});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->id, 20u);
  EXPECT_EQ(m->common, 3);
  EXPECT_FALSE(index.longest_common(Tokens{9, 1}));
  EXPECT_FALSE(index.longest_common(Tokens{}));
}

TEST(RadixIndex, PrefersTheQueryItselfThenTheShortestKey) {
  RadixIndex index;
  index.insert(Tokens{1, 2, 3, 4, 5, 6}, 1);
  index.insert(Tokens{1, 2, 3, 4}, 2);
  index.insert(Tokens{1, 2, 3, 9, 9}, 3);
  auto m = index.longest_common(Tokens{1, 2, 3, 4});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->id, 2u);
  m = index.longest_common(Tokens{1, 2, 3});  // all three share 3 tokens: the shortest
  ASSERT_TRUE(m);
  EXPECT_EQ(m->common, 3);
  EXPECT_EQ(m->id, 2u);
  EXPECT_EQ(m->key_length, 4);
}

TEST(RadixIndex, PrefixesOfAQuery) {
  RadixIndex index;
  index.insert(Tokens{1, 2, 3, 4, 5, 6}, 1);
  index.insert(Tokens{1, 2}, 2);
  index.insert(Tokens{1, 2, 3, 4}, 3);
  index.insert(Tokens{1, 2, 3, 7}, 4);
  EXPECT_EQ(index.prefixes_of(Tokens{1, 2, 3, 4, 5, 6, 7}), (std::vector<uint64_t>{2, 3, 1}));
  EXPECT_EQ(index.prefixes_of(Tokens{1, 2, 3, 4, 5}), (std::vector<uint64_t>{2, 3}));
  EXPECT_TRUE(index.prefixes_of(Tokens{1}).empty());
}

TEST(RadixIndex, EraseKeepsTheOthersReachable) {
  RadixIndex index;
  index.insert(Tokens{1, 2, 3}, 1);
  index.insert(Tokens{1, 2, 4}, 2);
  index.insert(Tokens{1, 2}, 3);
  EXPECT_FALSE(index.erase(Tokens{1}));
  EXPECT_FALSE(index.erase(Tokens{1, 2, 3, 4}));
  EXPECT_TRUE(index.erase(Tokens{1, 2}));
  EXPECT_FALSE(index.erase(Tokens{1, 2}));
  EXPECT_EQ(index.size(), 2u);
  EXPECT_TRUE(index.erase(Tokens{1, 2, 3}));
  auto m = index.longest_common(Tokens{1, 2, 4});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->id, 2u);
  EXPECT_EQ(m->common, 3);
  EXPECT_TRUE(index.erase(Tokens{1, 2, 4}));
  EXPECT_EQ(index.size(), 0u);
  EXPECT_FALSE(index.longest_common(Tokens{1, 2, 4}));
}

// Random keys over a small alphabet (many shared prefixes) against a brute
// force over the same keys.
TEST(RadixIndex, AgreesWithBruteForce) {
  std::mt19937 rng(5);
  std::map<Tokens, uint64_t> keys;
  RadixIndex index;
  auto random_tokens = [&](int max_len) {
    Tokens t(1 + rng() % max_len);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % 3);
    return t;
  };
  for (int step = 0; step < 400; ++step) {
    const Tokens key = random_tokens(8);
    if (rng() % 4 == 0 && !keys.empty()) {
      EXPECT_EQ(index.erase(key), keys.erase(key) == 1);
    } else {
      index.insert(key, step);
      keys[key] = step;
    }
    ASSERT_EQ(index.size(), keys.size());
    const Tokens query = random_tokens(10);
    int best = 0;
    for (const auto& [k, id] : keys) {
      size_t i = 0;
      while (i < k.size() && i < query.size() && k[i] == query[i]) ++i;
      best = std::max(best, static_cast<int>(i));
    }
    auto m = index.longest_common(query);
    if (best == 0) {
      EXPECT_FALSE(m);
      continue;
    }
    ASSERT_TRUE(m);
    EXPECT_EQ(m->common, best);
    // The id must belong to a key that really shares `best` tokens.
    bool found = false;
    for (const auto& [k, id] : keys)
      if (id == m->id) {
        found = true;
        EXPECT_EQ(static_cast<int>(k.size()), m->key_length);
        EXPECT_TRUE(std::equal(k.begin(), k.begin() + best, query.begin()));
      }
    EXPECT_TRUE(found);
  }
}

}  // namespace
}  // namespace revis::kvstore
