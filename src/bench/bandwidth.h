// Measures how fast this machine streams memory into the cores: the ceiling
// for decoding, which reads every weight once per generated token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace revis::bench {

// `bytes`, but at most a quarter of physical memory: the cap on the large
// buffers the benchmarks fill (this test's, and --matmul's matrix).
size_t capped_buffer_bytes(size_t bytes);

struct BandwidthOptions {
  int n_threads = 1;
  // Far larger than any last-level cache, so that reads come from DRAM.
  // Capped at a quarter of physical memory.
  size_t buffer_bytes = size_t{1} << 30;
};

// The buffer, allocated and filled once (untimed); each pass() then times
// one full sequential read of it, each thread summing its own contiguous
// slice. A benchmark can interleave passes with its own runs, so that both
// meet the same machine: on a shared host others' load moves the bandwidth
// by tens of percent within minutes.
class BandwidthProbe {
 public:
  explicit BandwidthProbe(const BandwidthOptions& options);
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;

  double pass();  // GB/s (10^9 bytes per second)
  // The best of kPassesPerMeasurement passes: one pass is a sample of a few
  // tens of milliseconds, and single ones vary by 10-20 %. Every pass is
  // appended to *every_pass unless it is null.
  static constexpr int kPassesPerMeasurement = 3;
  double best_pass(std::vector<double>* every_pass);
  size_t buffer_bytes() const;
  int n_threads() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace revis::bench
