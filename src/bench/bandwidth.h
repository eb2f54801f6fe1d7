// Measures how fast this machine streams memory into the cores: the ceiling
// for decoding, which reads every weight once per generated token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace revis::bench {

struct BandwidthOptions {
  int n_threads = 1;
  // Far larger than any last-level cache, so that reads come from DRAM.
  // Capped at a quarter of physical memory.
  size_t buffer_bytes = size_t{1} << 30;
  int passes = 5;
};

struct Bandwidth {
  double best_gb_s = 0;    // fastest pass, in 10^9 bytes per second
  double median_gb_s = 0;
  std::vector<double> pass_gb_s;
  size_t buffer_bytes = 0;  // after the cap
  int n_threads = 0;
};

// Allocates and fills the buffer (untimed), then times `passes` full
// sequential reads of it, each thread summing its own contiguous slice.
Bandwidth measure_read_bandwidth(const BandwidthOptions& options);

}  // namespace revis::bench
