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

// A group's activations are read once per weight row of a tile, so they
// should stay in L1 (48 KiB on recent x86 cores, beside the tile's rows).
// Long rows (an FFN's down projection: 8192 values, 35 KiB for four tokens
// in Q8_K, twice that packed) are therefore split into slices of columns
// whose activations fit this, the slices' dots added up. Slices are whole
// super-blocks, so every block format and packed layout splits evenly.
constexpr size_t kGroupSliceBytes = 16 * 1024;
constexpr int64_t kSliceQuantum = 256;

// Columns per slice for rows of `cols` values taking `bytes`: all of them
// when that fits `limit` (or the row cannot be split), else the fewest
// equal slices that fit.
int64_t slice_cols(int64_t cols, size_t bytes, size_t limit) {
  if (bytes <= limit || cols % kSliceQuantum != 0) return cols;
  const int64_t slices = static_cast<int64_t>((bytes + limit - 1) / limit);
  const int64_t quanta = cols / kSliceQuantum;
  return (quanta + slices - 1) / slices * kSliceQuantum;
}

// The slices of columns of a matrix kept in (or read through) stripes of
// `form`: the same for every token, so that a row's sum over them is the
// same bits whichever kernel took the token.
int64_t stripe_slice(int64_t cols, const PackedDot& form) { return slice_cols(cols, form.bytes(cols), kGroupSliceBytes); }

// From this many tokens on, the threads share the conversion of the
// activations (a few microseconds per token); below it, waking them would
// cost more than it saves.
constexpr int kParallelConversionTokens = 4 * kGroup;

// How far ahead of the row being multiplied a single-token pass asks for
// weights. The hardware prefetchers stop at every 4 KiB page and need a few
// misses to start again; requests this far ahead keep memory busy across
// page boundaries (32 KiB ahead was worth 10-15% of decoding speed on a
// 2-core Ice Lake; on a 2-core Zen 4, 16 KiB decoded Q8_0 about as fast as
// the best runs of 32 and 64 KiB, and without their slow runs).
constexpr size_t kPrefetchBytes = 16 * 1024;

// Those requests go out a slice of a row at a time, each slice just before
// its multiplication. A whole long row asked for at once (136 lines for an
// FFN down row in Q8_0) fills the core's queue of outstanding misses, and
// the multiplication's own loads wait behind it: that made the down
// projection stream 10-15% slower than the other matrices. Slices of at
// most this many weight bytes stream like the short rows do.
constexpr size_t kPrefetchSliceBytes = 2560;

// One cache line at p, into L2 or as non-temporal data. In asm: GCC drops
// loops of __builtin_prefetch that it inlines under a test of which hint
// to use (it takes them for loops without effects), and it had dropped the
// token groups' requests below since they were written.
inline void prefetch_line(const uint8_t* p, Prefetch how) {
#if defined(__x86_64__)
  if (how == Prefetch::kIntoL2)
    asm volatile("prefetcht1 %0" : : "m"(*p));
  else
    asm volatile("prefetchnta %0" : : "m"(*p));
#elif defined(__aarch64__)
  if (how == Prefetch::kIntoL2)
    asm volatile("prfm pldl2keep, [%0]" : : "r"(p));
  else
    asm volatile("prfm pldl1strm, [%0]" : : "r"(p));
#else
  if (how == Prefetch::kIntoL2)
    __builtin_prefetch(p, 0, 2);
  else
    __builtin_prefetch(p, 0, 0);
#endif
}

// Asks for the lines of [p, p + bytes) (nothing for Prefetch::kNone).
// Token groups ask into L2: their tiles are read once per group.
void prefetch(const uint8_t* p, size_t bytes, Prefetch how) {
  if (how == Prefetch::kNone) return;
  for (size_t offset = 0; offset < bytes; offset += 64) prefetch_line(p + offset, how);
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
  if (observer_ != nullptr) observer_->on_matmul(w, x, n_tokens, x_stride);
  if (w.stripes) return run_striped(pool, w, *w.stripes, x, n_tokens, x_stride, out, out_stride);
  // Stepwise, a matrix stored as rows (a mapped file) whose type has a
  // stripe form with lane_dot gives every token its stripes' bits, as if
  // it were kept in stripes: groups of tokens meet stripes repacked a tile
  // at a time, and a few tokens meet the rows where they are stored
  // through lane_dot, which needs no repacking.
  const PackedDot* lanes = stepwise_ ? stripe_form(w.type, w.cols) : nullptr;
  if (lanes && !lanes->lane_dot) lanes = nullptr;
  if (lanes && n_tokens > kGroup) return run_striped(pool, w, *lanes, x, n_tokens, x_stride, out, out_stride);
  const TensorType act_type = activation_type(w.type);
  const size_t act_row = row_bytes(act_type, w.cols);
  const DotKernels kernels =
      lanes ? DotKernels{lanes->lane_dot, nullptr, nullptr, nullptr, false} : dot_kernels(w.type, w.cols);
  const bool grouped = kernels.dot4 != nullptr && !stepwise_ && n_tokens >= kGroup;
  const int n_groups = grouped ? n_tokens / kGroup : 0;
  activations_.resize(act_row * n_tokens);
  const uint8_t* acts = activations_.data();
  // Where the backend has packed forms of dot4 and dot, each group of four
  // tokens and each token left over is packed once here and then met by
  // every weight row.
  const PackedDot* packed = n_groups > 0 ? kernels.packed4 : nullptr;
  const bool repack = packed && packed->repack_weights;
  const size_t repacked_row_bytes = repack ? packed->weight_bytes(w.cols) : 0;
  // Rows the packed dot4 takes at once: a stripe (quant.h), or one row.
  const int stripe_rows = repack ? packed->weight_rows : 1;
  const size_t packed_bytes = packed ? packed->bytes(w.cols) : 0;
  const int n_single = n_tokens - n_groups * kGroup;
  const PackedDot* packed_one = kernels.packed1;
  const size_t single_bytes = packed_one ? packed_one->bytes(w.cols) : 0;
  // Stepwise, tokens still go four at a time where the backend's kernel for
  // four gives each the very bits of the single-token kernel (quant.h:
  // DotKernels::dot4_exact, PackedDot::dot4 of packed1): packed as single
  // tokens, in the single tokens' slices, summed as theirs.
  const int n_fours = stepwise_ && (packed_one ? packed_one->dot4 != nullptr : kernels.dot4 && kernels.dot4_exact)
                          ? n_tokens / kGroup
                          : 0;
  const int prefetch_groups = n_groups + n_fours;
  packed_activations_.resize(packed_bytes * n_groups + single_bytes * n_single);
  uint8_t* const packed_groups = packed_activations_.data();
  uint8_t* const packed_singles = packed_groups + packed_bytes * n_groups;
  // Conversion in units of a group of four tokens, or of one token left
  // over: quantized, then packed where there is a packed form.
  auto convert = [&](int64_t first_unit, int64_t last_unit) {
    for (int64_t unit = first_unit; unit < last_unit; ++unit) {
      const bool group = unit < n_groups;
      const int64_t first = group ? unit * kGroup : n_groups * kGroup + (unit - n_groups), count = group ? kGroup : 1;
      for (int64_t t = first; t < first + count; ++t)
        quantize_row(act_type, x + t * x_stride, activations_.data() + t * act_row, w.cols);
      if (group && packed) packed->pack(acts + first * act_row, act_row, w.cols, packed_groups + unit * packed_bytes);
      if (!group && packed_one)
        packed_one->pack(acts + first * act_row, act_row, w.cols, packed_singles + (unit - n_groups) * single_bytes);
    }
  };
  if (n_tokens >= kParallelConversionTokens)
    pool.parallel_for(n_groups + n_single, convert);
  else
    convert(0, n_groups + n_single);

  const int64_t slice = grouped ? slice_cols(w.cols, packed ? packed_bytes : kGroup * act_row, kGroupSliceBytes) : w.cols;
  // Through lane_dot, a row's slices are its stripes' (run_striped), and
  // add up as theirs.
  const int64_t single_slice = lanes ? stripe_slice(w.cols, *lanes) : slice_cols(w.cols, w.row_bytes, kPrefetchSliceBytes);
  // Byte offsets of every slice, worked out once here rather than per row:
  // in the weight rows as the kernel reads them (repacked or stored), and
  // in the activations.
  auto weight_bytes = [&](int64_t n, bool repacked) { return repacked ? packed->weight_bytes(n) : row_bytes(w.type, n); };
  auto cut = [&](int64_t width, const PackedDot* packed_form, bool repacked, std::vector<Slice>& slices) {
    slices.clear();
    for (int64_t col = 0; col < w.cols; col += width) {
      const int64_t n = std::min(width, w.cols - col);
      slices.push_back({n, (repacked ? stripe_rows : 1) * weight_bytes(col, repacked), weight_bytes(n, repacked),
                        packed_form ? packed_form->bytes(col) : row_bytes(act_type, col)});
    }
  };
  cut(slice, packed, repack, group_slices_);
  cut(single_slice, packed_one, false, single_slices_);
  // A tile is kTileBytes of one slice of its rows (of whole rows when the
  // rows are not sliced), as the kernel reads them.
  const size_t slice_row_bytes = std::max<size_t>(weight_bytes(slice, repack), 1);
  // Whole stripes: every claim but a matrix's last then starts one.
  const int64_t tile_rows =
      std::max<int64_t>(1, static_cast<int64_t>(kTileBytes / slice_row_bytes) / stripe_rows) * stripe_rows;
  // Token groups re-read a piece once per group, and stepwise tokens once
  // per token: keep every piece a tile.
  const int64_t max_rows = grouped || (stepwise_ && n_tokens > 1) ? tile_rows : std::max(w.rows, tile_rows);
  const int64_t prefetch_rows = std::max<int64_t>(1, static_cast<int64_t>(kPrefetchBytes / std::max<size_t>(w.row_bytes, 1)));
  const int threads = pool.size();
  std::atomic<int64_t> next_row{0};
  pool.parallel_for(std::min<int64_t>(threads, (w.rows + tile_rows - 1) / tile_rows), [&](int64_t, int64_t) {
    int64_t begin, end, ahead_begin = 0, ahead_end = 0;
    auto claim_rows = [&](int64_t& first, int64_t& last) {
      return claim(next_row, w.rows, tile_rows, max_rows, threads, first, last);
    };
    bool claimed = claim_rows(begin, end);
    while (claimed) {
      // With token groups a thread claims its next tile before working on
      // this one, and asks for its rows a share per group: their first
      // reader (the repacking, or the first group) would otherwise wait on
      // memory, which the hardware prefetchers only start to cover a few
      // misses into each page. Not near the end, where holding a tile in
      // reserve could leave another thread with nothing to do.
      bool ahead = prefetch_groups > 0 && next_row.load(std::memory_order_relaxed) + threads * tile_rows <= w.rows &&
                   claim_rows(ahead_begin, ahead_end);
      const size_t ahead_bytes = ahead ? static_cast<size_t>(ahead_end - ahead_begin) * w.row_bytes : 0;
      auto prefetch_ahead = [&](int group) {
        const size_t from = (ahead_bytes * group / prefetch_groups) & ~size_t{63};
        const size_t to = ahead_bytes * (group + 1) / prefetch_groups;
        if (ahead) prefetch(w.row(ahead_begin) + from, to - from, Prefetch::kIntoL2);
      };
      int t = 0;
      // The tile's rows in the kernel's layout, where it has one. Per pool
      // thread, kept across calls. Repacking a tile costs about as much as
      // one group's products over it. It is done even for a single group:
      // which kernel a group meets must not depend on how many groups share
      // the call, or a resumed prompt (session_pool.h) would differ in its
      // last bits from a cold one.
      thread_local std::vector<uint8_t> repacked_storage;
      if (repack) {
        const int64_t stripes = (end - begin + stripe_rows - 1) / stripe_rows;
        repacked_storage.resize(static_cast<size_t>(stripes * stripe_rows) * repacked_row_bytes);
        packed->repack_weights(w.row(begin), w.row_bytes, end - begin, w.cols, repacked_storage.data());
      }
      auto group_row = [&](int64_t r) {
        return repack ? repacked_storage.data() + static_cast<size_t>(r - begin) * repacked_row_bytes : w.row(r);
      };
      if (grouped) {
        for (; t < n_groups * kGroup; t += kGroup) {
          const uint8_t* group = acts + t * act_row;
          const uint8_t* packed_group = packed ? packed_groups + (t / kGroup) * packed_bytes : nullptr;
          prefetch_ahead(t / kGroup);
          bool first = true;
          for (const Slice& s : group_slices_) {
            for (int64_t r = begin; r < end; r += stripe_rows) {
              float dots[kGroup * kMaxStripeRows];
              if (packed)
                packed->dot(group_row(r) + s.w_offset, packed_group + s.act_offset, s.n, dots);
              else
                kernels.dot4(w.row(r) + s.w_offset, group + s.act_offset, act_row, s.n, dots);
              const int64_t rows_here = std::min<int64_t>(stripe_rows, end - r);
              for (int k = 0; k < kGroup && t + k < n_tokens; ++k)
                for (int64_t i = 0; i < rows_here; ++i) {
                  float& o = out[(t + k) * out_stride + r + i];
                  o = first ? dots[k * stripe_rows + i] : o + dots[k * stripe_rows + i];
                }
            }
            first = false;
          }
        }
      }
      // A single-token pass asks for the row prefetch_rows ahead of the one
      // it multiplies. Near the end of its rows that row is in the thread's
      // next claim, which it therefore takes early: the requests run on into
      // it, where stopping at the end of each claim left every claim's
      // first rows to start cold. The shrinking claims at the end of a
      // matrix are many, about a dozen per thread, and a small matrix (a K
      // or V projection: 1 MiB) is mostly such claims. (Decoding a
      // Llama-3.2-1B-shaped Q8_0 model: 1-4% faster.)
      bool ahead_tried = ahead;
      auto row_ahead = [&](int64_t r) -> const uint8_t* {
        const int64_t target = r + prefetch_rows;
        if (target < end) return w.row(target);
        if (!ahead_tried) {
          ahead_tried = true;
          ahead = claim_rows(ahead_begin, ahead_end);
        }
        const int64_t in_next = ahead_begin + (target - end);
        return ahead && in_next < ahead_end ? w.row(in_next) : nullptr;
      };
      for (; t < n_fours * kGroup; t += kGroup) {
        prefetch_ahead(t / kGroup);
        for (int64_t r = begin; r < end; ++r) {
          float sums[kGroup] = {}, dots[kGroup];
          for (const Slice& s : single_slices_) {
            if (packed_one)
              packed_one->dot4(w.row(r) + s.w_offset, packed_singles + t * single_bytes + s.act_offset, single_bytes,
                               s.n, dots);
            else
              kernels.dot4(w.row(r) + s.w_offset, acts + t * act_row + s.act_offset, act_row, s.n, dots);
            for (int k = 0; k < kGroup; ++k) sums[k] += dots[k];
          }
          for (int k = 0; k < kGroup; ++k) out[(t + k) * out_stride + r] = sums[k];
        }
      }
      for (; t < n_tokens; ++t) {
        const uint8_t* a = acts + t * act_row;
        const uint8_t* packed_a = packed_one ? packed_singles + (t - n_groups * kGroup) * single_bytes : nullptr;
        for (int64_t r = begin; r < end; ++r) {
          float sum = 0.0f;
          // Only the first pass over the rows reads them from memory.
          const uint8_t* fetch = t == 0 && prefetch_ != Prefetch::kNone ? row_ahead(r) : nullptr;
          for (const Slice& s : single_slices_) {
            if (fetch) prefetch(fetch + s.w_offset, s.w_bytes, prefetch_);
            float dot;
            if (packed_one)
              packed_one->dot(w.row(r) + s.w_offset, packed_a + s.act_offset, s.n, &dot);
            else
              dot = kernels.dot(w.row(r) + s.w_offset, a + s.act_offset, s.n);
            sum = &s == single_slices_.data() ? dot : sum + dot;  // a first dot of -0 stays -0, as in stripes
          }
          out[t * out_stride + r] = sum;
        }
      }
      if (ahead) {
        begin = ahead_begin;
        end = ahead_end;
      } else {
        claimed = claim_rows(begin, end);
      }
    }
  });
}

void MatMul::run_striped(ThreadPool& pool, const Matrix& w, const PackedDot& form, const float* x, int n_tokens,
                         int64_t x_stride, float* out, int64_t out_stride) {
  const int stripe_rows = form.weight_rows;
  const TensorType act_type = activation_type(w.type);
  const size_t act_row = row_bytes(act_type, w.cols);
  // Groups of four tokens, the last filled up with copies of the last
  // token; a group of one real token takes dot_one, which gives the same
  // bits as dot's first row at a fraction of the work.
  const int n_groups = (n_tokens + kGroup - 1) / kGroup;
  const size_t packed_bytes = form.bytes(w.cols);
  activations_.resize(act_row * n_groups * kGroup);
  packed_activations_.resize(packed_bytes * n_groups);
  auto convert = [&](int64_t first_group, int64_t last_group) {
    for (int64_t g = first_group; g < last_group; ++g) {
      uint8_t* group = activations_.data() + g * kGroup * act_row;
      for (int64_t k = 0; k < kGroup; ++k) {
        if (g * kGroup + k < n_tokens)
          quantize_row(act_type, x + (g * kGroup + k) * x_stride, group + k * act_row, w.cols);
        else
          std::copy_n(group + (k - 1) * act_row, act_row, group + k * act_row);
      }
      form.pack(group, act_row, w.cols, packed_activations_.data() + g * packed_bytes);
    }
  };
  if (n_tokens >= kParallelConversionTokens)
    pool.parallel_for(n_groups, convert);
  else
    convert(0, n_groups);

  const int64_t slice = stripe_slice(w.cols, form);
  group_slices_.clear();
  for (int64_t col = 0; col < w.cols; col += slice) {
    const int64_t n = std::min(slice, w.cols - col);
    group_slices_.push_back({n, stripe_rows * form.weight_bytes(col), stripe_rows * form.weight_bytes(n), form.bytes(col)});
  }
  // Threads claim whole stripes: one group takes long runs of them, which
  // stream from memory best (the one-token kernels ask for the bytes ahead
  // of them as they go), several groups a tile of them each, re-read from
  // L2 by every group. A matrix stored as rows has each tile repacked into
  // stripes by the thread that claims it (run() sends only several groups
  // here), which costs about as much as one group's products over it.
  const bool repack = w.stripes == nullptr;
  const size_t stripe_bytes = stripe_rows * form.weight_bytes(w.cols);
  const int64_t stripes = repack ? (w.rows + stripe_rows - 1) / stripe_rows : w.stored_rows() / stripe_rows;
  const int64_t tile_stripes = std::max<int64_t>(1, static_cast<int64_t>(kTileBytes / stripe_bytes));
  const int64_t max_stripes = n_groups == 1 && !repack ? stripes : tile_stripes;
  // Where stripe `first` is stored, and the bytes of stripes [first, last) there.
  auto stored = [&](int64_t first) { return repack ? w.row(first * stripe_rows) : w.data + first * stripe_bytes; };
  auto stored_bytes = [&](int64_t first, int64_t last) {
    return repack ? static_cast<size_t>(std::min<int64_t>(last * stripe_rows, w.rows) - first * stripe_rows) * w.row_bytes
                  : static_cast<size_t>(last - first) * stripe_bytes;
  };
  const int threads = pool.size();
  std::atomic<int64_t> next_stripe{0};
  pool.parallel_for(std::min<int64_t>(threads, (stripes + tile_stripes - 1) / tile_stripes), [&](int64_t, int64_t) {
    int64_t begin, end, ahead_begin = 0, ahead_end = 0;
    auto claim_stripes = [&](int64_t& first, int64_t& last) {
      return claim(next_stripe, stripes, tile_stripes, max_stripes, threads, first, last);
    };
    bool claimed = claim_stripes(begin, end);
    while (claimed) {
      // With several groups the next tile is claimed now and its stripes
      // asked for a share per group, as in run().
      const bool ahead = n_groups > 1 && claim_stripes(ahead_begin, ahead_end);
      const size_t ahead_bytes = ahead ? stored_bytes(ahead_begin, ahead_end) : 0;
      thread_local std::vector<uint8_t> repacked;  // per pool thread, kept across calls
      if (repack) {
        const int64_t first_row = begin * stripe_rows;
        repacked.resize(static_cast<size_t>(end - begin) * stripe_bytes);
        form.repack_weights(w.row(first_row), w.row_bytes, std::min<int64_t>(end * stripe_rows, w.rows) - first_row,
                            w.cols, repacked.data());
      }
      auto stripe_at = [&](int64_t stripe) {
        return repack ? repacked.data() + (stripe - begin) * stripe_bytes : w.data + stripe * stripe_bytes;
      };
      for (int g = 0; g < n_groups; ++g) {
        if (ahead) {
          const size_t from = (ahead_bytes * g / n_groups) & ~size_t{63}, to = ahead_bytes * (g + 1) / n_groups;
          prefetch(stored(ahead_begin) + from, to - from, Prefetch::kIntoL2);
        }
        const uint8_t* packed_group = packed_activations_.data() + g * packed_bytes;
        const int tokens_here = std::min(kGroup, n_tokens - g * kGroup);
        for (int64_t stripe = begin; stripe < end; ++stripe) {
          float sums[kGroup * kMaxStripeRows], dots[kGroup * kMaxStripeRows];
          const int values = tokens_here * stripe_rows;  // dot_one writes one token's
          for (size_t k = 0; k < group_slices_.size(); ++k) {
            const Slice& s = group_slices_[k];
            const uint8_t* weights = stripe_at(stripe) + s.w_offset;
            float* into = k == 0 ? sums : dots;
            if (tokens_here == 1)
              form.dot_one(weights, packed_group + s.act_offset, s.n, into);
            else
              form.dot(weights, packed_group + s.act_offset, s.n, into);
            if (k > 0)
              for (int i = 0; i < values; ++i) sums[i] += dots[i];
          }
          const int64_t r0 = stripe * stripe_rows;
          const int64_t rows_here = std::min<int64_t>(stripe_rows, w.rows - r0);
          for (int t = 0; t < tokens_here; ++t)
            std::copy_n(&sums[t * stripe_rows], rows_here, &out[(g * kGroup + t) * out_stride + r0]);
        }
      }
      if (ahead) {
        begin = ahead_begin;
        end = ahead_end;
      } else {
        claimed = claim_stripes(begin, end);
      }
    }
  });
}

}  // namespace revis
