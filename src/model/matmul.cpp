#include "model/matmul.h"

#include <algorithm>
#include <atomic>

#include "quant/quant.h"

namespace revis {
namespace {

// Weight bytes of the smallest piece of rows a thread claims, and of every
// piece when tokens are taken four at a time: small enough that the piece
// stays in L2 beside the activations and that threads finish within one
// piece of each other, large enough that claiming it costs nothing next to
// reading it.
constexpr size_t kTileBytes = 32 * 1024;

constexpr int kGroup = 4;  // tokens per vec_dot4

// How far ahead of the row being multiplied a single-token pass asks for
// weights. The hardware prefetchers stop at every 4 KiB page and need a few
// misses to start again; requests this far ahead keep memory busy across
// page boundaries (worth 10-15% of decoding speed on a 2-core Ice Lake).
constexpr size_t kPrefetchBytes = 32 * 1024;

void prefetch(const uint8_t* p, size_t bytes) {
  for (size_t offset = 0; offset < bytes; offset += 64) __builtin_prefetch(p + offset);
}

// Claims the next rows [begin, end) from `next`: a share of what is left
// (half of it split between the threads), between min_rows and max_rows.
// Early pieces are long, which streams best from memory, and the last ones
// short, so that the threads finish together.
bool claim(std::atomic<int64_t>& next, int64_t rows, int64_t min_rows, int64_t max_rows, int threads, int64_t& begin,
           int64_t& end) {
  begin = next.load(std::memory_order_relaxed);
  do {
    if (begin >= rows) return false;
    const int64_t share = (rows - begin) / (2 * threads);
    end = std::min(rows, begin + std::clamp(share, min_rows, max_rows));
  } while (!next.compare_exchange_weak(begin, end, std::memory_order_relaxed));
  return true;
}

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
  // Token groups re-read a piece once per group: keep every piece a tile.
  const bool grouped = kernels.dot4 != nullptr && n_tokens >= kGroup;
  const int64_t max_rows = grouped ? tile_rows : std::max(w.rows, tile_rows);
  const int64_t prefetch_rows = std::max<int64_t>(1, static_cast<int64_t>(kPrefetchBytes / std::max<size_t>(w.row_bytes, 1)));
  const int threads = pool.size();
  std::atomic<int64_t> next_row{0};
  pool.parallel_for(std::min<int64_t>(threads, (w.rows + tile_rows - 1) / tile_rows), [&](int64_t, int64_t) {
    int64_t begin, end;
    while (claim(next_row, w.rows, tile_rows, max_rows, threads, begin, end)) {
      int t = 0;
      if (grouped) {
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
        for (int64_t r = begin; r < end; ++r) {
          // Only the first pass over the rows reads them from memory.
          if (t == 0 && r + prefetch_rows < end) prefetch(w.row(r + prefetch_rows), w.row_bytes);
          out[t * out_stride + r] = kernels.dot(w.row(r), a, w.cols);
        }
      }
    }
  });
}

}  // namespace revis
