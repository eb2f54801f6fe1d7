#include "model/ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// The vector loops (softmax, swiglu, axpy) are compiled twice on x86-64, for
// the baseline and for AVX2+FMA, and the loader picks one per CPU: the rest
// of the binary stays runnable on any x86-64. Each loop over positions is
// one call, so the per-position work is inlined.
#if defined(__x86_64__) && !defined(__clang__)
#define REVIS_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define REVIS_VECTOR_CLONES
#endif
// The helpers below must be inlined into each clone: one left out of line is
// compiled once, for the baseline, and the AVX2 clone would call that.
#define ALWAYS_INLINE [[gnu::always_inline]] inline

namespace revis {

void rms_norm(float* out, const float* x, const float* weight, int n, float eps) {
  // Squares in float, summed in double, the mean back in float: the same
  // steps as llama.cpp, so that values rounded to float16 downstream (the KV
  // cache) round the same way as in the reference.
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (!weight) {
    for (int i = 0; i < n; ++i) out[i] = x[i] * scale;
    return;
  }
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

namespace {

// Eight floats as one value: GCC's vector extension, plain arithmetic that
// each clone compiles for its own vector width. Loads are unaligned. (GCC
// warns that returning one changes the ABI without AVX: these helpers are
// inline and file-local, so no call between differently built code exists.)
using Float8 = float __attribute__((vector_size(32)));
#pragma GCC diagnostic ignored "-Wpsabi"

ALWAYS_INLINE Float8 load8(const float* p) {
  Float8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Sixteen floats, for the AVX-512 attention kernels only.
using Float16 = float __attribute__((vector_size(64)));

template <typename Vec>
ALWAYS_INLINE Vec load_vec(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A vector's lanes folded to eight: lane j + lane j + 8.
ALWAYS_INLINE Float8 fold8(Float8 v) { return v; }
ALWAYS_INLINE Float8 fold8(Float16 v) {
  return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
         __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
}

// The totals of eight vectors, total k = the sum of lanes[k]'s lanes, as one
// vector: three rounds of pairwise shuffles and adds, 14 shuffles for all
// eight where summing each vector alone costs 7 apiece.
ALWAYS_INLINE Float8 sum_lanes(const Float8 (&lanes)[8]) {
  Float8 pairs[4], quads[2];  // pairs[k]: rows 2k, 2k+1 alternating; quads[j]: rows 4j..4j+3 twice
  for (int k = 0; k < 4; ++k)
    pairs[k] = __builtin_shufflevector(lanes[2 * k], lanes[2 * k + 1], 0, 8, 2, 10, 4, 12, 6, 14) +
               __builtin_shufflevector(lanes[2 * k], lanes[2 * k + 1], 1, 9, 3, 11, 5, 13, 7, 15);
  for (int j = 0; j < 2; ++j)
    quads[j] = __builtin_shufflevector(pairs[2 * j], pairs[2 * j + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
               __builtin_shufflevector(pairs[2 * j], pairs[2 * j + 1], 2, 3, 10, 11, 6, 7, 14, 15);
  return __builtin_shufflevector(quads[0], quads[1], 0, 1, 2, 3, 8, 9, 10, 11) +
         __builtin_shufflevector(quads[0], quads[1], 4, 5, 6, 7, 12, 13, 14, 15);
}

// e^x for x <= 0, eight at a time, within 2 ulp of std::exp (which is a call
// per value). x = n ln2 + r with |r| <= ln2/2: e^x = 2^n e^r, e^r by its
// Taylor series to r^6 (error < 2e-7 relative). Below -87 (where e^x leaves
// the normal floats) it returns e^-87, which a softmax's sum cannot tell
// from zero.
ALWAYS_INLINE Float8 exp_nonpositive(Float8 x) {
  using Int8 = int32_t __attribute__((vector_size(32)));
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  x = x < -87.0f ? -87.0f : x;
  const Float8 shifted = x * 1.44269504f + kRound;
  const Float8 n = shifted - kRound;
  const Float8 r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-6f;  // ln 2 in two parts
  const Float8 er = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
  // The integer in shifted's low mantissa bits becomes 2^n's exponent field.
  const Int8 exponent = std::bit_cast<Int8>(shifted) - std::bit_cast<int32_t>(kRound) + 127;
  return er * std::bit_cast<Float8>(exponent << 23);
}

// silu(g) * u, where silu(g) = g / (1 + e^-g), written with e^-|g| so that
// exp's argument is never positive: for g < 0 it equals g e^g / (1 + e^g).
ALWAYS_INLINE Float8 swiglu8(Float8 g, Float8 u) {
  const Float8 e = exp_nonpositive(g < 0.0f ? g : -g);
  return (g < 0.0f ? g * e / (1.0f + e) : g / (1.0f + e)) * u;
}

}  // namespace

namespace {

// The largest of n >= 1 values.
ALWAYS_INLINE float max_of(const float* x, int n) {
  float max = x[0];
  int i = 0;
  if (n >= 8) {
    Float8 maxima = load8(x);
    for (; i + 8 <= n; i += 8) {
      const Float8 v = load8(x + i);
      maxima = v > maxima ? v : maxima;
    }
    for (int j = 0; j < 8; ++j) max = maxima[j] > max ? maxima[j] : max;
  }
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  return max;
}

// In place x[i] = e^(x[i] - max) for values <= max; returns their sum.
ALWAYS_INLINE float exp_minus_max(float* x, int n, float max) {
  Float8 sums = {};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const Float8 e = exp_nonpositive(load8(x + i) - max);
    std::memcpy(x + i, &e, sizeof e);
    sums += e;
  }
  float sum = 0.0f;
  if (const int left = n - i; left > 0) {  // the last few, in lanes that start at e^-87
    Float8 v = {};
    v -= 87.0f;
    for (int j = 0; j < left; ++j) v[j] = x[i + j] - max;
    const Float8 e = exp_nonpositive(v);
    for (int j = 0; j < left; ++j) sum += x[i + j] = e[j];
  }
  for (int j = 0; j < 8; ++j) sum += sums[j];
  return sum;
}

}  // namespace

REVIS_VECTOR_CLONES
void softmax(float* x, int n) {
  const float inv = 1.0f / exp_minus_max(x, n, max_of(x, n));
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

REVIS_VECTOR_CLONES
float softmax_step(float* x, int n, float& max, float& sum) {
  const float tile_max = max_of(x, n);
  if (sum == 0.0f || tile_max > max) {
    // A larger max: what came before shrinks by e^(old - new). (Before the
    // first tile there is nothing to shrink.)
    const float shrink = sum == 0.0f ? 0.0f : std::exp(max - tile_max);
    max = tile_max;
    sum = sum * shrink + exp_minus_max(x, n, max);
    return shrink;
  }
  sum += exp_minus_max(x, n, max);
  return 1.0f;
}

REVIS_VECTOR_CLONES
void swiglu(float* gate, const float* up, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const Float8 out = swiglu8(load8(gate + i), load8(up + i));
    std::memcpy(gate + i, &out, sizeof out);
  }
  if (const int left = n - i; left > 0) {  // the last few, in zeroed lanes
    Float8 g = {}, u = {};
    for (int j = 0; j < left; ++j) g[j] = gate[i + j], u[j] = up[i + j];
    const Float8 out = swiglu8(g, u);
    for (int j = 0; j < left; ++j) gate[i + j] = out[j];
  }
}

void swiglu_clamped(float* gate, const float* up, int n, float alpha, float limit) {
  for (int i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    gate[i] = g / (1.0f + std::exp(alpha * -g)) * (u + 1.0f);
  }
}

namespace {
// gelu(h) for every float16 h, itself rounded to float16: 64K values,
// computed once.
const std::vector<uint16_t>& gelu_of_halves() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(1 << 16);
    for (uint32_t h = 0; h < t.size(); ++h) {
      const float x = fp16_to_fp32(static_cast<uint16_t>(h));
      const float y = 0.5f * x * (1.0f + std::tanh(0.79788456080286535588f * x * (1.0f + 0.044715f * x * x)));
      t[h] = fp32_to_fp16(y);
    }
    return t;
  }();
  return table;
}
}  // namespace

void geglu(float* gate, const float* up, int n) {
  const std::vector<uint16_t>& table = gelu_of_halves();
  for (int i = 0; i < n; ++i) {
    const float x = gate[i];
    if (x <= -10.0f)
      gate[i] = 0.0f;
    else if (x >= 10.0f)
      gate[i] = x * up[i];
    else
      gate[i] = fp16_to_fp32(table[fp32_to_fp16(x)]) * up[i];
  }
}

void add(float* out, const float* x, int n) {
  for (int i = 0; i < n; ++i) out[i] += x[i];
}

// The rounding runs through quant's float16 row kernels (F16C where the CPU
// has it), a stack-sized piece at a time.
void round_to_f16(float* x, int n) {
  constexpr int kPiece = 256;
  uint16_t halves[kPiece];
  for (int i = 0; i < n; i += kPiece) {
    const int m = n - i < kPiece ? n - i : kPiece;
    quantize_row(TensorType::F16, x + i, halves, m);
    dequantize_row(TensorType::F16, halves, x + i, m);
  }
}

REVIS_VECTOR_CLONES
void axpy(float* out, float scale, const float* x, int n) {
  for (int i = 0; i < n; ++i) out[i] += scale * x[i];
}

// --- Attention over a float16 cache -------------------------------------------
//
// Converting the cache's halves is part of the inner loops, so these two are
// not left to the compiler's clones: the AVX2 build converts eight halves
// with one F16C instruction, which no baseline clone can contain. They are
// written once, over a Halves policy that loads a vector's worth of halves
// as floats (eight, or sixteen for AVX-512), and compiled for AVX-512, for
// AVX2+FMA+F16C and for the baseline; the kernel backend in use (quant.h)
// picks one, so `--kernels scalar` runs the portable code.

namespace {

// Eight halves as floats, one at a time (any CPU)... (Through a reference,
// not returned: a vector passed by value between functions built for
// different targets would change the ABI, which clang rejects.)
struct PortableHalves {
  using Vec = Float8;
  static constexpr int kLanes = 8;
  ALWAYS_INLINE static void load(const uint16_t* p, Float8& out) {
#if defined(__aarch64__)
    using Half8 = __fp16 __attribute__((vector_size(16)));
    Half8 h;
    std::memcpy(&h, p, sizeof h);
    out = __builtin_convertvector(h, Float8);
#else
    for (int j = 0; j < 8; ++j) out[j] = fp16_to_fp32(p[j]);
#endif
  }
};

#if defined(__x86_64__)
// The AVX2 entry points are flattened: every helper below is inlined into
// them and compiled for their target. (The helpers cannot carry the target
// themselves, the portable versions share them.)
#define REVIS_AVX2_TARGET __attribute__((target("avx2,fma,f16c"), flatten))
// ...or with one vcvtph2ps.
struct F16cHalves {
  using Vec = Float8;
  static constexpr int kLanes = 8;
  __attribute__((target("avx2,fma,f16c"))) static void load(const uint16_t* p, Float8& out) {
    const __m256 floats = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    std::memcpy(&out, &floats, sizeof out);
  }
};

// AVX-512: sixteen halves, and sixteen lanes to every vector of the kernels
// below, which halves their instructions per value.
#define REVIS_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"), flatten))
struct Avx512Halves {
  using Vec = Float16;
  static constexpr int kLanes = 16;
  __attribute__((target("avx512f,avx2,fma,f16c"))) static void load(const uint16_t* p, Float16& out) {
    // The zero-masked form: GCC 12's plain one starts from an undefined
    // register, which its -Wmaybe-uninitialized reports.
    const __m512 floats = _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    std::memcpy(&out, &floats, sizeof out);
  }
};
#endif

// How far ahead of the rows they multiply the kernels ask for the cache's
// lines. The hardware prefetchers stop at every 4 KiB page; a thread reading
// a deep cache (512 KiB per head at 4096 positions) otherwise waits on each
// new page with the arithmetic idle. 8 KiB ahead took one thread's share of
// a decoded token's attention at 4096 positions from 81 to 62 cycles per
// position and KV head (Zen 5; 53 with the cache in L2).
constexpr int64_t kCachePrefetchBytes = 8 * 1024;

// Asks for the lines of `bytes` bytes from `row` + kCachePrefetchBytes, as
// far as they lie before `end`.
ALWAYS_INLINE void prefetch_ahead(const uint16_t* row, int64_t bytes, const uint16_t* end) {
  const char* const start = reinterpret_cast<const char*>(row);
  const int64_t last = std::min(kCachePrefetchBytes + bytes, static_cast<int64_t>(reinterpret_cast<const char*>(end) - start));
  for (int64_t offset = kCachePrefetchBytes; offset < last; offset += 64) __builtin_prefetch(start + offset, 0, 3);
}

// A vector's total in sum_lanes's order, so that a position's score has the
// same bits whichever block of positions it is computed in.
ALWAYS_INLINE float sum_tree(Float8 v) { return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); }

// Scores of kHeads heads against kPositions rows. Lane j of each (head, row)
// vector sums the products of elements j, j + L, ... (L lanes: Halves's);
// the kHeads * kPositions vectors are independent chains (hiding the adds'
// latency), eight of them when the block is full, folded to eight lanes
// and summed across lanes together.
template <typename Halves, int kHeads, int kPositions>
ALWAYS_INLINE void score_block(const float* q, size_t q_stride, const uint16_t* keys, int dim, float scale,
                               float* scores, size_t scores_stride) {
  using Vec = typename Halves::Vec;
  constexpr int kChains = kHeads * kPositions, kLanes = Halves::kLanes;
  Vec lanes[kChains] = {};
  int i = 0;
  for (; i + kLanes <= dim; i += kLanes) {
    Vec key[kPositions];
    for (int p = 0; p < kPositions; ++p) Halves::load(keys + static_cast<int64_t>(p) * dim + i, key[p]);
    for (int h = 0; h < kHeads; ++h) {
      const Vec qv = load_vec<Vec>(q + h * q_stride + i);
      for (int p = 0; p < kPositions; ++p) lanes[h * kPositions + p] += qv * key[p];
    }
  }
  Float8 folded[kChains];
  for (int c = 0; c < kChains; ++c) folded[c] = fold8(lanes[c]);
  Float8 totals = {};  // chain c's total in lane c
  if constexpr (kChains == 8) {
    totals = sum_lanes(folded);
  } else {
    for (int c = 0; c < kChains; ++c) totals[c] = sum_tree(folded[c]);
  }
  if (i < dim)  // dims past the last multiple of L
    for (int h = 0; h < kHeads; ++h)
      for (int p = 0; p < kPositions; ++p) {
        float tail = 0.0f;
        for (int j = i; j < dim; ++j)
          tail += q[h * q_stride + j] * fp16_to_fp32(keys[static_cast<int64_t>(p) * dim + j]);
        totals[h * kPositions + p] += tail;
      }
  totals *= scale;
  for (int h = 0; h < kHeads; ++h)
    for (int p = 0; p < kPositions; ++p) scores[h * scores_stride + p] = totals[h * kPositions + p];
}

// kHeads heads against all n rows, kPositions rows at a time.
template <typename Halves, int kHeads, int kPositions>
ALWAYS_INLINE void score_rows(const float* q, size_t q_stride, const uint16_t* keys, int n, int n_cached, int dim,
                              float scale, float* scores, size_t scores_stride) {
  const uint16_t* const end = keys + static_cast<int64_t>(n_cached) * dim;
  int p = 0;
  for (; p + kPositions <= n; p += kPositions) {
    const uint16_t* block = keys + static_cast<int64_t>(p) * dim;
    prefetch_ahead(block, int64_t{kPositions} * dim * sizeof(uint16_t), end);
    score_block<Halves, kHeads, kPositions>(q, q_stride, block, dim, scale, scores + p, scores_stride);
  }
  for (; p < n; ++p)
    score_block<Halves, kHeads, 1>(q, q_stride, keys + static_cast<int64_t>(p) * dim, dim, scale, scores + p,
                                   scores_stride);
}

// Heads four at a time (eight chains: two rows), then two (four rows), then
// one (eight rows).
template <typename Halves>
ALWAYS_INLINE void scores_for_heads(const float* q, size_t q_stride, int heads, const uint16_t* keys, int n,
                                    int n_cached, int dim, float scale, float* scores, size_t scores_stride) {
  int h = 0;
  for (; h + 4 <= heads; h += 4)
    score_rows<Halves, 4, 2>(q + h * q_stride, q_stride, keys, n, n_cached, dim, scale, scores + h * scores_stride, scores_stride);
  for (; h + 2 <= heads; h += 2)
    score_rows<Halves, 2, 4>(q + h * q_stride, q_stride, keys, n, n_cached, dim, scale, scores + h * scores_stride, scores_stride);
  for (; h < heads; ++h)
    score_rows<Halves, 1, 8>(q + h * q_stride, q_stride, keys, n, n_cached, dim, scale, scores + h * scores_stride, scores_stride);
}

// Columns [col, col + 8 kVectors) of kHeads heads' outputs: they stay in
// registers over all n rows instead of being read and written once per row.
// Each register's sum is a chain of multiply-adds, one per row; eight
// registers make enough chains to keep the multiply-add units busy. The
// pass over the first columns asks for the rows ahead.
template <typename Halves, int kHeads, int kVectors>
ALWAYS_INLINE void add_value_columns(const float* weights, size_t weights_stride, const uint16_t* values, int n,
                                     int n_cached, int stride, int col, float* out, size_t out_stride) {
  using Vec = typename Halves::Vec;
  constexpr int kLanes = Halves::kLanes;
  Vec acc[kHeads][kVectors];
  for (int h = 0; h < kHeads; ++h)
    for (int v = 0; v < kVectors; ++v) acc[h][v] = load_vec<Vec>(out + h * out_stride + col + kLanes * v);
  const uint16_t* const end = values + static_cast<int64_t>(n_cached) * stride;
  for (int p = 0; p < n; ++p) {
    if (col == 0) prefetch_ahead(values + static_cast<int64_t>(p) * stride, int64_t{stride} * sizeof(uint16_t), end);
    const uint16_t* row = values + static_cast<int64_t>(p) * stride + col;
    Vec value[kVectors];
    for (int v = 0; v < kVectors; ++v) Halves::load(row + kLanes * v, value[v]);
    for (int h = 0; h < kHeads; ++h) {
      const float w = weights[h * weights_stride + p];
      for (int v = 0; v < kVectors; ++v) acc[h][v] += w * value[v];
    }
  }
  for (int h = 0; h < kHeads; ++h) std::memcpy(out + h * out_stride + col, acc[h], sizeof acc[h]);
}

// kHeads heads' outputs, L * kVectors columns at a time (L lanes:
// Halves's), then L, then one. Each column sums its rows in order, so the
// lanes give the same bits.
template <typename Halves, int kHeads, int kVectors>
ALWAYS_INLINE void add_values_of_heads(const float* weights, size_t weights_stride, const uint16_t* values, int n,
                                       int n_cached, int dim, int stride, float* out, size_t out_stride) {
  constexpr int kLanes = Halves::kLanes;
  int col = 0;
  for (; col + kLanes * kVectors <= dim; col += kLanes * kVectors)
    add_value_columns<Halves, kHeads, kVectors>(weights, weights_stride, values, n, n_cached, stride, col, out,
                                                 out_stride);
  for (; col + kLanes <= dim; col += kLanes)
    add_value_columns<Halves, kHeads, 1>(weights, weights_stride, values, n, n_cached, stride, col, out, out_stride);
  for (; col < dim; ++col)
    for (int h = 0; h < kHeads; ++h) {
      float acc = out[h * out_stride + col];
      for (int p = 0; p < n; ++p)
        acc += weights[h * weights_stride + p] * fp16_to_fp32(values[static_cast<int64_t>(p) * stride + col]);
      out[h * out_stride + col] = acc;
    }
}

template <typename Halves>
ALWAYS_INLINE void values_for_heads(const float* weights, size_t weights_stride, int heads, const uint16_t* values,
                                    int n, int n_cached, int dim, int stride, float* out, size_t out_stride) {
  int h = 0;
  for (; h + 4 <= heads; h += 4)
    add_values_of_heads<Halves, 4, 2>(weights + h * weights_stride, weights_stride, values, n, n_cached, dim,
                                      stride, out + h * out_stride, out_stride);
  for (; h + 2 <= heads; h += 2)
    add_values_of_heads<Halves, 2, 4>(weights + h * weights_stride, weights_stride, values, n, n_cached, dim,
                                      stride, out + h * out_stride, out_stride);
  for (; h < heads; ++h)
    add_values_of_heads<Halves, 1, 8>(weights + h * weights_stride, weights_stride, values, n, n_cached, dim,
                                      stride, out + h * out_stride, out_stride);
}

void scores_portable(const float* q, size_t q_stride, int heads, const uint16_t* keys, int n, int n_cached, int dim,
                     float scale, float* scores, size_t scores_stride) {
  scores_for_heads<PortableHalves>(q, q_stride, heads, keys, n, n_cached, dim, scale, scores, scores_stride);
}

void values_portable(const float* weights, size_t weights_stride, int heads, const uint16_t* values, int n,
                     int n_cached, int dim, int stride, float* out, size_t out_stride) {
  values_for_heads<PortableHalves>(weights, weights_stride, heads, values, n, n_cached, dim, stride, out, out_stride);
}

#if defined(__x86_64__)
REVIS_AVX2_TARGET void scores_avx2(const float* q, size_t q_stride, int heads, const uint16_t* keys, int n,
                                   int n_cached, int dim, float scale, float* scores, size_t scores_stride) {
  scores_for_heads<F16cHalves>(q, q_stride, heads, keys, n, n_cached, dim, scale, scores, scores_stride);
}

REVIS_AVX2_TARGET void values_avx2(const float* weights, size_t weights_stride, int heads, const uint16_t* values,
                                   int n, int n_cached, int dim, int stride, float* out, size_t out_stride) {
  values_for_heads<F16cHalves>(weights, weights_stride, heads, values, n, n_cached, dim, stride, out, out_stride);
}

REVIS_AVX512_TARGET void scores_avx512(const float* q, size_t q_stride, int heads, const uint16_t* keys, int n,
                                       int n_cached, int dim, float scale, float* scores, size_t scores_stride) {
  scores_for_heads<Avx512Halves>(q, q_stride, heads, keys, n, n_cached, dim, scale, scores, scores_stride);
}

REVIS_AVX512_TARGET void values_avx512(const float* weights, size_t weights_stride, int heads,
                                       const uint16_t* values, int n, int n_cached, int dim, int stride, float* out,
                                       size_t out_stride) {
  values_for_heads<Avx512Halves>(weights, weights_stride, heads, values, n, n_cached, dim, stride, out, out_stride);
}
#endif

}  // namespace

void attention_scores(const float* q, size_t q_stride, int heads, const uint16_t* keys, int n, int n_cached, int dim,
                      float scale, float* scores, size_t scores_stride) {
#if defined(__x86_64__)
  switch (active_kernel_backend()) {
    case KernelBackend::kAvx512:
      return scores_avx512(q, q_stride, heads, keys, n, n_cached, dim, scale, scores, scores_stride);
    case KernelBackend::kAvx2:
      return scores_avx2(q, q_stride, heads, keys, n, n_cached, dim, scale, scores, scores_stride);
    default:
      break;
  }
#endif
  scores_portable(q, q_stride, heads, keys, n, n_cached, dim, scale, scores, scores_stride);
}

void add_weighted_values(const float* weights, size_t weights_stride, int heads, const uint16_t* values, int n,
                         int n_cached, int dim, int row_stride, float* out, size_t out_stride) {
#if defined(__x86_64__)
  switch (active_kernel_backend()) {
    case KernelBackend::kAvx512:
      return values_avx512(weights, weights_stride, heads, values, n, n_cached, dim, row_stride, out, out_stride);
    case KernelBackend::kAvx2:
      return values_avx2(weights, weights_stride, heads, values, n, n_cached, dim, row_stride, out, out_stride);
    default:
      break;
  }
#endif
  values_portable(weights, weights_stride, heads, values, n, n_cached, dim, row_stride, out, out_stride);
}

}  // namespace revis
