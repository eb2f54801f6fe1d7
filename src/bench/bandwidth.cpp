#include "bench/bandwidth.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>

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

}  // namespace

size_t capped_buffer_bytes(size_t bytes) {
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return bytes;  // unknown: no cap
  return std::min(bytes, static_cast<size_t>(pages) * static_cast<size_t>(page_size) / 4);
}

struct BandwidthProbe::State {
  ThreadPool pool;
  size_t slice_words;
  std::unique_ptr<uint64_t[]> buffer;
  std::vector<uint64_t> slice_sums;
  volatile uint64_t sink = 0;  // the sums are used, so the reads cannot be dropped
  explicit State(int n_threads) : pool(n_threads) {}
};

BandwidthProbe::BandwidthProbe(const BandwidthOptions& options) {
  const int n_threads = std::max(1, options.n_threads);
  const size_t bytes = capped_buffer_bytes(options.buffer_bytes);
  state_ = std::make_unique<State>(n_threads);
  // Whole 64-byte lines per thread, so every slice has the same length.
  const size_t slice_words = std::max<size_t>(8, bytes / sizeof(uint64_t) / n_threads / 8 * 8);
  state_->slice_words = slice_words;
  state_->slice_sums.resize(n_threads);
  // Uninitialised on purpose: each thread writes its own slice first, so the
  // pages are faulted in (and, on NUMA machines, placed) before any timing.
  state_->buffer.reset(new uint64_t[slice_words * n_threads]);
  uint64_t* buffer = state_->buffer.get();
  state_->pool.parallel_for(n_threads, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      uint64_t* slice = buffer + t * slice_words;
      for (size_t i = 0; i < slice_words; ++i) slice[i] = t * slice_words + i;
    }
  });
}

BandwidthProbe::~BandwidthProbe() = default;

size_t BandwidthProbe::buffer_bytes() const { return state_->slice_words * state_->slice_sums.size() * sizeof(uint64_t); }

int BandwidthProbe::n_threads() const { return static_cast<int>(state_->slice_sums.size()); }

double BandwidthProbe::pass() {
  State& s = *state_;
  const auto start = std::chrono::steady_clock::now();
  s.pool.parallel_for(n_threads(), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) s.slice_sums[t] = sum_words(s.buffer.get() + t * s.slice_words, s.slice_words);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (uint64_t sum : s.slice_sums) s.sink = s.sink + sum;
  return static_cast<double>(buffer_bytes()) / seconds / 1e9;
}

double BandwidthProbe::best_pass(std::vector<double>* every_pass) {
  double best = 0;
  for (int i = 0; i < kPassesPerMeasurement; ++i) {
    const double gb_s = pass();
    best = std::max(best, gb_s);
    if (every_pass) every_pass->push_back(gb_s);
  }
  return best;
}

}  // namespace revis::bench
