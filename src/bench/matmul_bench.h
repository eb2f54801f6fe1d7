// revis bench --matmul TYPES: matrix products of each weight type timed
// without a model (matmul_speed.h), with every kernel backend this CPU has,
// or the one `kernels` names, and the machine's read bandwidth measured
// between the runs. Progress on stderr; a report on stdout, or one JSON
// object with `json`.
//
// Thread-safety: switches the process's kernel backend while it runs (and
// back before it returns), so nothing else may evaluate meanwhile.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "revis/status.h"

namespace revis::bench {

struct MatMulBenchArgs {
  std::vector<std::string> types;  // "q4_k", "q6_k", "q8_0"
  std::string kernels;             // empty: every SIMD backend this CPU has
  int repetitions = 5;             // >= 1
  int threads = 0;                 // 0: physical cores
  size_t memory_mib = 1024;        // >= 1
  bool json = false;
  bool striped = false;   // the matrices in stripes (matmul_speed.h)
  bool stepwise = false;  // the products as a model runs them (matmul_speed.h)
};

// Runs and prints; an error names the flag (--matmul, --kernels) it comes from.
Status run_matmul_bench(const MatMulBenchArgs& args);

}  // namespace revis::bench
