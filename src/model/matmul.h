// Matrix multiplication of quantized weights with float activations:
// out[t][r] = dot(W row r, x[t]) for every token t of a batch. The batch is
// converted once to the weight type's activation format, then rows are split
// across the pool's threads; each weight row is read once for the whole batch.
#pragma once

#include <cstdint>
#include <vector>

#include "model/thread_pool.h"
#include "model/weights.h"

namespace revis {

class MatMul {
 public:
  // x: n_tokens rows of w.cols floats (stride x_stride); out: n_tokens rows
  // of w.rows floats (stride out_stride).
  void run(ThreadPool& pool, const Matrix& w, const float* x, int n_tokens, int64_t x_stride, float* out,
           int64_t out_stride);

 private:
  std::vector<uint8_t> activations_;  // reused between calls
};

}  // namespace revis
