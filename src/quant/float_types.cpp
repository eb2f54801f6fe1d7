// Plain float rows: F32, F16 and BF16. Their activations are rows of the
// same type (an F16 weight is dotted with an F16 activation, as llama.cpp
// does), so each dot product is an element-wise multiply-add.
//
// Products are accumulated in double, in a fixed number of independent
// lanes: the result does not depend on how a compiler vectorises the loop,
// and summing thousands of products loses no precision worth mentioning.
#include <cstdint>
#include <cstring>

#include "quant/half.h"
#include "quant/kernels.h"

namespace revis::quant {
namespace {

constexpr int kLanes = 8;

template <typename T, typename ToFloat>
float dot_lanes(const T* w, const T* a, int64_t n, ToFloat to_float) {
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l)
      lanes[l] += static_cast<double>(to_float(w[i + l])) * static_cast<double>(to_float(a[i + l]));
  for (; i < n; ++i) lanes[0] += static_cast<double>(to_float(w[i])) * static_cast<double>(to_float(a[i]));
  double sum = 0;
  for (double lane : lanes) sum += lane;
  return static_cast<float>(sum);
}

}  // namespace

void dequantize_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
float dot_f32(const void* w, const void* a, int64_t n) {
  return dot_lanes(static_cast<const float*>(w), static_cast<const float*>(a), n, [](float v) { return v; });
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(h[i]);
}
void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = float_to_half(src[i]);
}
float dot_f16(const void* w, const void* a, int64_t n) {
  return dot_lanes(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a), n, half_to_float);
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bfloat_to_float(h[i]);
}
void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = float_to_bfloat(src[i]);
}
float dot_bf16(const void* w, const void* a, int64_t n) {
  return dot_lanes(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a), n, bfloat_to_float);
}

}  // namespace revis::quant
