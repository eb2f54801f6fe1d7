// The preparation pool: lanes keep order, the queue is bounded, and the
// threads have the stack they were given.
#include "net/preparation_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "base/mutex.h"

namespace revis::node {
namespace {

TEST(PreparationPool, ALaneRunsItsTasksOneAtATimeInOrder) {
  PreparationPool pool(10'000);
  ASSERT_TRUE(pool.start(4, 1 << 20).ok());
  auto lane = pool.new_lane();
  Mutex mu;
  std::vector<int> seen;
  std::atomic<int> running{0}, overlaps{0};
  std::promise<void> done;
  for (int i = 0; i < 2000; ++i)
    ASSERT_TRUE(pool.post(lane, [&, i] {
      if (running.fetch_add(1) != 0) ++overlaps;
      {
        MutexLock lock(mu);
        seen.push_back(i);
      }
      running.fetch_sub(1);
      if (i == 1999) done.set_value();
    }));
  done.get_future().wait();
  EXPECT_EQ(overlaps.load(), 0);
  MutexLock lock(mu);
  ASSERT_EQ(seen.size(), 2000u);
  for (int i = 0; i < 2000; ++i) EXPECT_EQ(seen[i], i);
}

TEST(PreparationPool, RefusesPastTheQueueButNotWhatMustFollow) {
  PreparationPool pool(2);
  ASSERT_TRUE(pool.start(1, 1 << 20).ok());
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.post([&] { gate.wait(); ++ran; }));
  ASSERT_TRUE(pool.post([&] { ++ran; }));
  EXPECT_FALSE(pool.post([&] { ++ran; })) << "two wait already";
  auto lane = pool.new_lane();
  EXPECT_FALSE(pool.post(lane, [&] { ++ran; }));
  std::promise<void> last;
  pool.post_always(lane, [&] { ++ran; last.set_value(); });
  release.set_value();
  last.get_future().wait();
  EXPECT_EQ(ran.load(), 3);
  // Once they ran, the queue takes work again.
  std::promise<void> again;
  EXPECT_TRUE(pool.post([&] { again.set_value(); }));
  again.get_future().wait();
}

TEST(PreparationPool, ThreadsHaveTheStackTheyWereGiven) {
  PreparationPool pool(8);
  ASSERT_TRUE(pool.start(1, 3 << 20).ok());
  std::promise<size_t> size;
  ASSERT_TRUE(pool.post([&] {
    pthread_attr_t attr;
    size_t bytes = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstacksize(&attr, &bytes);
      pthread_attr_destroy(&attr);
    }
    size.set_value(bytes);
  }));
  EXPECT_GE(size.get_future().get(), size_t{3} << 20);
}

TEST(PreparationPool, StopDropsWhatWaitsAndJoins) {
  std::atomic<int> ran{0};
  {
    PreparationPool pool(100);
    ASSERT_TRUE(pool.start(1, 1 << 20).ok());
    std::promise<void> started;
    ASSERT_TRUE(pool.post([&] {
      started.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ++ran;
    }));
    started.get_future().wait();
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool.post([&] { ++ran; }));
  }
  EXPECT_EQ(ran.load(), 1) << "the running task finishes; the waiting ones are dropped";
}

}  // namespace
}  // namespace revis::node
