// ThreadPool: a fixed set of worker threads, created once, that run
// parallel_for over an index range. The calling thread takes part, so a
// pool of n threads starts n-1 workers. One parallel_for runs at a time;
// the pool is meant to be owned by one inference (one caller thread).
//
// A decoding step issues a hundred or more parallel_for calls, each lasting
// tens of microseconds, so waking sleeping threads through the kernel every
// time would cost a noticeable share of the step. Workers therefore spin on
// an atomic counter for a short while after each job and only then sleep on
// a condition variable; the caller spins while the others finish.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace revis {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint contiguous chunks covering [0, n), one
  // chunk per thread, and returns when all are done.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

  // Number of physical cores, for the default of -t.
  static int default_threads();

 private:
  void worker_loop(int index);
  void run_chunk(int index);

  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_size_ = 0;
  std::atomic<uint64_t> generation_{0};  // bumped once per job
  std::atomic<int> pending_{0};          // workers still running the job
  std::atomic<bool> stopping_{false};
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;                     // guards sleeping only
  std::condition_variable wake_;
};

}  // namespace revis
