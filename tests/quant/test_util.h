// Helpers shared by the quant tests: deterministic pseudo-random data and
// the list of types each test covers.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quant/kernels.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace revis::quant_test {

// Standard normal samples from a fixed seed. Box-Muller over mt19937's raw
// output rather than std::normal_distribution, whose algorithm differs
// between standard libraries: the same seed gives the same data everywhere.
inline std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 engine(seed);
  auto uniform = [&] { return (static_cast<double>(engine()) + 0.5) / 4294967296.0; };  // (0, 1)
  std::vector<float> out(n);
  for (size_t i = 0; i < n; i += 2) {
    const double radius = std::sqrt(-2.0 * std::log(uniform()));
    const double angle = 2.0 * 3.14159265358979323846 * uniform();
    out[i] = static_cast<float>(sigma * radius * std::cos(angle));
    if (i + 1 < n) out[i + 1] = static_cast<float>(sigma * radius * std::sin(angle));
  }
  return out;
}

// Every type revis reads from model files (Q8_K is activation-only).
inline const std::vector<TensorType>& weight_types() {
  static const std::vector<TensorType> types = {
      TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0,   TensorType::Q4_1,
      TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K,   TensorType::Q3_K,
      TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS,
      TensorType::MXFP4};
  return types;
}

// The IQ1/IQ2/IQ3 grid types: read from model files; IQ3_XXS and IQ3_S have
// a plain quantizer, the IQ1 and IQ2 types one that needs importance.
inline const std::vector<TensorType>& grid_types() {
  static const std::vector<TensorType> types = {TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ2_S,
                                                TensorType::IQ3_XXS, TensorType::IQ3_S,  TensorType::IQ1_S,
                                                TensorType::IQ1_M};
  return types;
}

// Every type with a quantizer: the weight types plus Q8_K.
inline std::vector<TensorType> quantizable_types() {
  std::vector<TensorType> types = weight_types();
  types.push_back(TensorType::Q8_K);
  return types;
}

// The scalar reference kernels, taken directly (whatever backend the
// dispatch table holds), for the SIMD tests to compare against.
struct ScalarKernels {
  quant::DequantizeFn dequantize;
  quant::QuantizeFn quantize;
  quant::DotFn dot;
};

inline const std::map<TensorType, ScalarKernels>& scalar_kernels() {
  using namespace quant;
  static const std::map<TensorType, ScalarKernels> kernels = {
      {TensorType::F32, {dequantize_f32, quantize_f32, dot_f32}},
      {TensorType::F16, {dequantize_f16, quantize_f16, dot_f16}},
      {TensorType::BF16, {dequantize_bf16, quantize_bf16, dot_bf16}},
      {TensorType::Q4_0, {dequantize_q4_0, quantize_q4_0, dot_q4_0}},
      {TensorType::Q4_1, {dequantize_q4_1, quantize_q4_1, dot_q4_1}},
      {TensorType::Q5_0, {dequantize_q5_0, quantize_q5_0, dot_q5_0}},
      {TensorType::Q5_1, {dequantize_q5_1, quantize_q5_1, dot_q5_1}},
      {TensorType::Q8_0, {dequantize_q8_0, quantize_q8_0, dot_q8_0}},
      {TensorType::Q2_K, {dequantize_q2_k, quantize_uniform<quantize_q2_k>, dot_q2_k}},
      {TensorType::Q3_K, {dequantize_q3_k, quantize_uniform<quantize_q3_k>, dot_q3_k}},
      {TensorType::Q4_K, {dequantize_q4_k, quantize_q4_k, dot_q4_k}},
      {TensorType::Q5_K, {dequantize_q5_k, quantize_q5_k, dot_q5_k}},
      {TensorType::Q6_K, {dequantize_q6_k, quantize_q6_k, dot_q6_k}},
      {TensorType::Q8_K, {dequantize_q8_k, quantize_q8_k, dot_q8_k}},
      {TensorType::IQ4_NL, {dequantize_iq4_nl, quantize_iq4_nl, dot_iq4_nl}},
      {TensorType::MXFP4, {dequantize_mxfp4, quantize_mxfp4, dot_mxfp4}},
      {TensorType::IQ4_XS, {dequantize_iq4_xs, quantize_uniform<quantize_iq4_xs>, dot_iq4_xs}},
      {TensorType::IQ2_XXS, {dequantize_iq2_xxs, nullptr, dot_iq2_xxs}},
      {TensorType::IQ2_XS, {dequantize_iq2_xs, nullptr, dot_iq2_xs}},
      {TensorType::IQ2_S, {dequantize_iq2_s, nullptr, dot_iq2_s}},
      {TensorType::IQ3_XXS, {dequantize_iq3_xxs, quantize_uniform<quantize_iq3_xxs>, dot_iq3_xxs}},
      {TensorType::IQ3_S, {dequantize_iq3_s, quantize_uniform<quantize_iq3_s>, dot_iq3_s}},
      {TensorType::IQ1_S, {dequantize_iq1_s, nullptr, dot_iq1_s}},
      {TensorType::IQ1_M, {dequantize_iq1_m, nullptr, dot_iq1_m}},
  };
  return kernels;
}

inline int64_t block_size(TensorType type) { return type_traits(type).block_size; }

// A row of a grid type (grid_types()) of random bytes, every block's half
// scale d replaced by one of magnitude 2^-8..2^2 and random sign: every
// grid point, sign pattern and group scale a file could hold, with finite
// products.
inline std::vector<uint8_t> random_grid_row(TensorType type, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> bytes(row_bytes(type, n));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const size_t block_bytes = type_traits(type).block_bytes;
  for (size_t at = 0; at < bytes.size(); at += block_bytes) {
    const auto d = static_cast<uint16_t>((rng() & 0x8000) | (0x1c00 + rng() % 0x1400));
    if (type == TensorType::IQ1_M) {
      // d's four nibbles are the top nibbles of the last four 16-bit words.
      for (int w = 0; w < 4; ++w) {
        uint8_t& high = bytes[at + block_bytes - 8 + 2 * w + 1];
        high = static_cast<uint8_t>((high & 0x0f) | (((d >> (4 * w)) & 0x0f) << 4));
      }
    } else {
      bytes[at] = static_cast<uint8_t>(d);  // d leads every other grid block
      bytes[at + 1] = static_cast<uint8_t>(d >> 8);
    }
  }
  return bytes;
}

// x -> stored type -> float.
inline std::vector<float> round_trip(TensorType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> packed(row_bytes(type, n));
  quantize_row(type, x.data(), packed.data(), n);
  std::vector<float> y(x.size());
  dequantize_row(type, packed.data(), y.data(), n);
  return y;
}

inline double rms(const std::vector<float>& x) {
  double sum = 0;
  for (float v : x) sum += static_cast<double>(v) * v;
  return std::sqrt(sum / static_cast<double>(x.size()));
}

// rms(x - y) / rms(x).
inline double relative_rms_error(const std::vector<float>& x, const std::vector<float>& y) {
  double error = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double diff = static_cast<double>(x[i]) - y[i];
    error += diff * diff;
    norm += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(error / norm);
}

// A test run on each kernel backend in turn (skipped where the CPU lacks
// it), the best one restored after.
class OnEveryBackend : public ::testing::TestWithParam<KernelBackend> {
 protected:
  void SetUp() override {
    if (!kernel_backend_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << kernel_backend_name(GetParam());
    ASSERT_TRUE(use_kernel_backend(GetParam()).ok());
  }
  void TearDown() override { ASSERT_TRUE(use_kernel_backend(best_kernel_backend()).ok()); }
};
struct BackendName {
  std::string operator()(const ::testing::TestParamInfo<KernelBackend>& info) const {
    return kernel_backend_name(info.param);
  }
};

// gtest parameter names: "Q4_K" is a valid test name, so use it as is.
struct TypeName {
  std::string operator()(const ::testing::TestParamInfo<TensorType>& info) const { return type_name(info.param); }
};

}  // namespace revis::quant_test
