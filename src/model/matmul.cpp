#include "model/matmul.h"

#include "quant/quant.h"

namespace revis {

void MatMul::run(ThreadPool& pool, const Matrix& w, const float* x, int n_tokens, int64_t x_stride, float* out,
                 int64_t out_stride) {
  const TensorType act_type = activation_type(w.type);
  const size_t act_row = row_bytes(act_type, w.cols);
  activations_.resize(act_row * n_tokens);
  for (int t = 0; t < n_tokens; ++t)
    quantize_row(act_type, x + t * x_stride, activations_.data() + t * act_row, w.cols);
  const uint8_t* acts = activations_.data();
  pool.parallel_for(w.rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* row = w.row(r);
      for (int t = 0; t < n_tokens; ++t) out[t * out_stride + r] = vec_dot(w.type, row, acts + t * act_row, w.cols);
    }
  });
}

}  // namespace revis
