// Summaries of repeated measurements. Benchmarks report the median, which a
// single disturbed run cannot move, with the spread beside it.
#pragma once

#include <vector>

namespace revis::bench {

struct Summary {
  double median = 0, min = 0, max = 0;
  double p25 = 0, p75 = 0;  // quartiles, linear between the nearest samples
};

// All zeros for an empty sample.
Summary summarize(std::vector<double> samples);

}  // namespace revis::bench
