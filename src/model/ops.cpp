#include "model/ops.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/quant.h"

// The attention loops (attention_scores, weighted_sum, axpy) are compiled
// twice on x86-64, for the baseline and for AVX2+FMA, and the loader picks
// one per CPU: the rest of the binary stays runnable on any x86-64. Each
// loop over positions is one call, so the per-position work is inlined.
#if defined(__x86_64__) && !defined(__clang__)
#define REVIS_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define REVIS_VECTOR_CLONES
#endif

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

inline Float8 load8(const float* p) {
  Float8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// out[k] = dot(q, rows[k]) for kRows rows of `dim` floats. Each dot keeps
// eight partial sums in a vector (lane j sums elements j, j + 8, ...), then
// adds the tail and the lanes in a fixed order: no reassociation beyond
// that, so no -ffast-math is needed. Several rows at once are independent
// chains, which hides the latency of the adds.
template <int kRows>
inline void dot_rows(const float* q, const float* rows, int dim, float* out) {
  Float8 lanes[kRows] = {};
  int i = 0;
  for (; i + 8 <= dim; i += 8) {
    const Float8 qv = load8(q + i);
    for (int k = 0; k < kRows; ++k) lanes[k] += qv * load8(rows + static_cast<int64_t>(k) * dim + i);
  }
  for (int k = 0; k < kRows; ++k) {
    const float* row = rows + static_cast<int64_t>(k) * dim;
    float sum = 0.0f;
    for (int j = i; j < dim; ++j) sum += q[j] * row[j];
    for (int j = 0; j < 8; ++j) sum += lanes[k][j];
    out[k] = sum;
  }
}

// e^x for x <= 0, within 2 ulp of std::exp, in plain arithmetic the compiler
// vectorises (std::exp is a call per value). x = n ln2 + r with |r| <= ln2/2:
// e^x = 2^n e^r, e^r by its Taylor series to r^6 (error < 2e-7 relative).
// Below -87 (where e^x leaves the normal floats) it returns e^-87, which a
// softmax's sum cannot tell from zero.
inline float exp_nonpositive(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  x = x < -87.0f ? -87.0f : x;
  const float shifted = x * 1.44269504f + kRound;
  const float n = shifted - kRound;
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-6f;  // ln 2 in two parts
  const float er = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
  const int32_t exponent = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound) + 127;
  return er * std::bit_cast<float>(exponent << 23);
}

}  // namespace

// Eight partial maxima and sums, like dot(): vectorisable without -ffast-math.
REVIS_VECTOR_CLONES
void softmax(float* x, int n) {
  float partial_max[8];
  for (float& m : partial_max) m = x[0];
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) partial_max[j] = x[i + j] > partial_max[j] ? x[i + j] : partial_max[j];
  float max = x[0];
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  for (float m : partial_max) max = m > max ? m : max;

  float partial_sum[8] = {};
  for (i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      x[i + j] = exp_nonpositive(x[i + j] - max);
      partial_sum[j] += x[i + j];
    }
  float sum = 0.0f;
  for (; i < n; ++i) {
    x[i] = exp_nonpositive(x[i] - max);
    sum += x[i];
  }
  for (float p : partial_sum) sum += p;
  const float inv = 1.0f / sum;
  for (i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
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
  for (; p + 4 <= n; p += 4) dot_rows<4>(q, keys + static_cast<int64_t>(p) * dim, dim, scores + p);
  for (; p < n; ++p) dot_rows<1>(q, keys + static_cast<int64_t>(p) * dim, dim, scores + p);
  for (p = 0; p < n; ++p) scores[p] *= scale;
}

REVIS_VECTOR_CLONES
void weighted_sum(const float* weights, const float* rows, int n, int dim, float* out) {
  // 32 outputs at a time stay in four vector registers over all n rows,
  // instead of out being read and written once per row.
  constexpr int kVectors = 4, kWidth = 8 * kVectors;
  int i = 0;
  for (; i + kWidth <= dim; i += kWidth) {
    Float8 acc[kVectors] = {};
    for (int p = 0; p < n; ++p) {
      const float* row = rows + static_cast<int64_t>(p) * dim + i;
      for (int v = 0; v < kVectors; ++v) acc[v] += weights[p] * load8(row + 8 * v);
    }
    std::memcpy(out + i, acc, sizeof acc);
  }
  for (; i < dim; ++i) {
    float acc = 0.0f;
    for (int p = 0; p < n; ++p) acc += weights[p] * rows[static_cast<int64_t>(p) * dim + i];
    out[i] = acc;
  }
}

}  // namespace revis
