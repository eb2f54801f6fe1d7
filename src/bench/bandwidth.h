// Measures how fast this machine streams memory into the cores: the ceiling
// for decoding, which reads every weight once per generated token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace revis::bench {

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
  size_t buffer_bytes() const;
  int n_threads() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace revis::bench
