#include "model/ops.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/quant.h"

// The vector loops (softmax, swiglu, axpy, attention_scores, add_weighted_sum)
// are compiled twice on x86-64, for the baseline and for AVX2+FMA, and the
// loader picks one per CPU: the rest of the binary stays runnable on any
// x86-64. Each loop over positions is one call, so the per-position work is
// inlined.
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

// out[k] = dot(q, rows[k]) for kRows rows (1 or 8) of `dim` floats. Lane j
// of a row's vector sums its elements j, j + 8, ...; eight rows at once are
// independent chains (hiding the adds' latency) and are summed across lanes
// together. Plain arithmetic in a fixed order: no -ffast-math needed.
template <int kRows>
ALWAYS_INLINE void dot_rows(const float* q, const float* rows, int dim, float* out) {
  static_assert(kRows == 1 || kRows == 8);
  Float8 lanes[kRows] = {};
  int i = 0;
  for (; i + 8 <= dim; i += 8) {
    const Float8 qv = load8(q + i);
    for (int k = 0; k < kRows; ++k) lanes[k] += qv * load8(rows + static_cast<int64_t>(k) * dim + i);
  }
  float tails[kRows] = {};
  for (int k = 0; k < kRows; ++k)
    for (int j = i; j < dim; ++j) tails[k] += q[j] * rows[static_cast<int64_t>(k) * dim + j];
  if constexpr (kRows == 8) {
    const Float8 totals = sum_lanes(lanes);
    for (int k = 0; k < 8; ++k) out[k] = totals[k] + tails[k];
  } else {
    out[0] = tails[0];
    for (int j = 0; j < 8; ++j) out[0] += lanes[0][j];
  }
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

REVIS_VECTOR_CLONES
void softmax(float* x, int n) {
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

  Float8 sums = {};
  for (i = 0; i + 8 <= n; i += 8) {
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
  const float inv = 1.0f / sum;
  for (i = 0; i < n; ++i) x[i] *= inv;
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

REVIS_VECTOR_CLONES
void attention_scores(const float* q, const float* keys, int n, int dim, float scale, float* scores) {
  int p = 0;
  for (; p + 8 <= n; p += 8) dot_rows<8>(q, keys + static_cast<int64_t>(p) * dim, dim, scores + p);
  for (; p < n; ++p) dot_rows<1>(q, keys + static_cast<int64_t>(p) * dim, dim, scores + p);
  for (p = 0; p < n; ++p) scores[p] *= scale;
}

// out[0 .. 8 kVectors) += sum over p of weights[p] * rows[p][0 .. 8 kVectors):
// the outputs stay in registers over all n rows instead of being read and
// written once per row. Each register's sum is a chain of multiply-adds, one
// per row, so only with eight registers (64 outputs) do enough chains run at
// once to keep the multiply-add units busy rather than waiting on each other.
template <int kVectors>
ALWAYS_INLINE void add_weighted_columns(const float* weights, const float* rows, int n, int dim, float* out) {
  Float8 acc[kVectors];
  for (int v = 0; v < kVectors; ++v) acc[v] = load8(out + 8 * v);
  for (int p = 0; p < n; ++p) {
    const float* row = rows + static_cast<int64_t>(p) * dim;
    for (int v = 0; v < kVectors; ++v) acc[v] += weights[p] * load8(row + 8 * v);
  }
  std::memcpy(out, acc, sizeof acc);
}

REVIS_VECTOR_CLONES
void add_weighted_sum(const float* weights, const float* rows, int n, int dim, float* out) {
  int i = 0;
  for (; i + 64 <= dim; i += 64) add_weighted_columns<8>(weights, rows + i, n, dim, out + i);
  for (; i + 8 <= dim; i += 8) add_weighted_columns<1>(weights, rows + i, n, dim, out + i);
  for (; i < dim; ++i) {
    float acc = out[i];
    for (int p = 0; p < n; ++p) acc += weights[p] * rows[static_cast<int64_t>(p) * dim + i];
    out[i] = acc;
  }
}

}  // namespace revis
