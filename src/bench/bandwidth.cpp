#include "bench/bandwidth.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "bench/stats.h"
#include "model/thread_pool.h"

namespace revis::bench {
namespace {

// Eight independent accumulators give the compiler a loop it vectorises and
// keep the adds off one dependency chain, so the loop is limited by loads,
// not by add latency.
uint64_t sum_words(const uint64_t* words, size_t n) {
  uint64_t acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += words[i + k];
  for (; i < n; ++i) acc[0] += words[i];
  uint64_t total = 0;
  for (uint64_t a : acc) total += a;
  return total;
}

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page_size) : 0;
}

}  // namespace

Bandwidth measure_read_bandwidth(const BandwidthOptions& options) {
  const int n_threads = std::max(1, options.n_threads);
  size_t bytes = options.buffer_bytes;
  if (const size_t ram = physical_memory_bytes(); ram > 0) bytes = std::min(bytes, ram / 4);
  // Whole 64-byte lines per thread, so every slice has the same length.
  const size_t slice_words = std::max<size_t>(8, bytes / sizeof(uint64_t) / n_threads / 8 * 8);
  const size_t words = slice_words * n_threads;

  ThreadPool pool(n_threads);
  // Uninitialised on purpose: each thread writes its own slice first, so the
  // pages are faulted in (and, on NUMA machines, placed) before any timing.
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[words]);
  pool.parallel_for(n_threads, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      uint64_t* slice = buffer.get() + t * slice_words;
      for (size_t i = 0; i < slice_words; ++i) slice[i] = t * slice_words + i;
    }
  });

  Bandwidth result;
  result.buffer_bytes = words * sizeof(uint64_t);
  result.n_threads = n_threads;
  std::vector<uint64_t> slice_sums(n_threads);
  volatile uint64_t sink = 0;  // the sums are used, so the reads cannot be dropped
  for (int pass = 0; pass < std::max(1, options.passes); ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(n_threads, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) slice_sums[t] = sum_words(buffer.get() + t * slice_words, slice_words);
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (uint64_t s : slice_sums) sink = sink + s;
    result.pass_gb_s.push_back(static_cast<double>(result.buffer_bytes) / seconds / 1e9);
  }
  const Summary summary = summarize(result.pass_gb_s);
  result.best_gb_s = summary.max;
  result.median_gb_s = summary.median;
  return result;
}

}  // namespace revis::bench
