#include "model/matmul.h"

#include <algorithm>
#include <atomic>

#include "quant/quant.h"

namespace revis {
namespace {

// Weight bytes per tile: small enough that a tile stays in L2 beside the
// activations and that threads finish within one tile of each other, large
// enough that claiming a tile costs nothing next to reading it.
constexpr size_t kTileBytes = 32 * 1024;

constexpr int kGroup = 4;  // tokens per vec_dot4

}  // namespace

void MatMul::run(ThreadPool& pool, const Matrix& w, const float* x, int n_tokens, int64_t x_stride, float* out,
                 int64_t out_stride) {
  const TensorType act_type = activation_type(w.type);
  const size_t act_row = row_bytes(act_type, w.cols);
  activations_.resize(act_row * n_tokens);
  for (int t = 0; t < n_tokens; ++t)
    quantize_row(act_type, x + t * x_stride, activations_.data() + t * act_row, w.cols);
  const uint8_t* acts = activations_.data();
  const DotKernels kernels = dot_kernels(w.type, w.cols);

  const int64_t tile_rows = std::max<int64_t>(1, static_cast<int64_t>(kTileBytes / std::max<size_t>(w.row_bytes, 1)));
  const int64_t n_tiles = (w.rows + tile_rows - 1) / tile_rows;
  std::atomic<int64_t> next_tile{0};
  pool.parallel_for(std::min<int64_t>(pool.size(), n_tiles), [&](int64_t, int64_t) {
    for (int64_t tile; (tile = next_tile.fetch_add(1, std::memory_order_relaxed)) < n_tiles;) {
      const int64_t begin = tile * tile_rows, end = std::min(w.rows, begin + tile_rows);
      int t = 0;
      if (kernels.dot4) {
        for (; t + kGroup <= n_tokens; t += kGroup) {
          const uint8_t* group = acts + t * act_row;
          for (int64_t r = begin; r < end; ++r) {
            float dots[kGroup];
            kernels.dot4(w.row(r), group, act_row, w.cols, dots);
            for (int k = 0; k < kGroup; ++k) out[(t + k) * out_stride + r] = dots[k];
          }
        }
      }
      for (; t < n_tokens; ++t) {
        const uint8_t* a = acts + t * act_row;
        for (int64_t r = begin; r < end; ++r) out[t * out_stride + r] = kernels.dot(w.row(r), a, w.cols);
      }
    }
  });
}

}  // namespace revis
