// revis bench --matmul TYPES: matrix products of each weight type timed
// without a model (bench/matmul_speed.h), with every kernel backend this CPU
// has, or the one --kernels names, and the machine's read bandwidth measured
// between the runs. A report on stdout, or one JSON object with --json.
#pragma once

#include <cstddef>
#include <string>

namespace revis::cli {

struct MatMulBenchArgs {
  std::string types;    // "q4_k,q6_k,q8_0"
  std::string kernels;  // empty: every SIMD backend this CPU has
  int repetitions = 5;
  int threads = 0;      // 0: physical cores
  size_t memory_mib = 1024;
  bool json = false;
  bool striped = false;  // the matrices in stripes (bench/matmul_speed.h)
};

int run_bench_matmul(const MatMulBenchArgs& args);

}  // namespace revis::cli
