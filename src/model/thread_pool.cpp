#include "model/thread_pool.h"

#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace revis {
namespace {

// About 50-100 microseconds of spinning: longer than the gap between two
// matmuls of one decoding step, far shorter than the gap between requests.
constexpr int kSpinIterations = 20000;

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_chunk(int index) {
  const int64_t n = job_size_, parts = size();
  const int64_t begin = n * index / parts, end = n * (index + 1) / parts;
  if (begin < end) (*job_)(begin, end);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (workers_.empty() || n <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  job_ = &fn;
  job_size_ = n;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  // Sequentially consistent, like sleepers_: a worker that registered as a
  // sleeper before this bump is notified below, and one that registers after
  // it sees the new generation in its wait predicate. Either way none sleeps
  // through a job. The bump also publishes job_ and job_size_.
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_all();
  }
  run_chunk(0);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins)
    if (spins < kSpinIterations) cpu_relax(); else std::this_thread::yield();
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t current = generation_.load(std::memory_order_acquire);
    for (int spins = 0; current == seen && spins < kSpinIterations; ++spins) {
      cpu_relax();
      current = generation_.load(std::memory_order_acquire);
    }
    if (current == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      current = generation_.load(std::memory_order_acquire);
    }
    seen = current;
    if (stopping_.load()) return;
    run_chunk(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

int ThreadPool::default_threads() {
  // Count distinct (package, core) pairs: SMT siblings share memory bandwidth
  // and execution units, so they add little to a bandwidth-bound workload.
  std::set<std::pair<std::string, std::string>> cores;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, package;
  while (std::getline(cpuinfo, line)) {
    auto value = [&] { return line.substr(line.find(':') + 1); };
    if (line.rfind("physical id", 0) == 0) package = value();
    if (line.rfind("core id", 0) == 0) cores.insert({package, value()});
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return n > 0 ? n : 1;
}

}  // namespace revis
