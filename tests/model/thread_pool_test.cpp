#include "model/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <vector>

namespace revis {
namespace {

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 3, 7, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, ManyShortJobsInARow) {
  // Decoding issues thousands of tiny jobs; none may be lost or run twice.
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int job = 0; job < 20000; ++job)
    pool.parallel_for(4, [&](int64_t begin, int64_t end) { total.fetch_add(end - begin); });
  EXPECT_EQ(total.load(), 4 * 20000);
}

TEST(ThreadPool, WakesWorkersAfterTheyFellAsleep) {
  ThreadPool pool(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the spin phase
  std::atomic<int> chunks{0};
  pool.parallel_for(2, [&](int64_t, int64_t) { chunks.fetch_add(1); });
  EXPECT_EQ(chunks.load(), 2);
}

TEST(ThreadPool, DefaultThreadsIsPositive) { EXPECT_GE(ThreadPool::default_threads(), 1); }

}  // namespace
}  // namespace revis
