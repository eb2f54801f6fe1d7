// The x86 SIMD kernels (simd_avx2.cpp, simd_avx512.cpp) against the scalar
// reference kernels:
// activation quantization and F16 conversions bit-identical, dot products
// (one row and four rows at once) within float summation-order rounding,
// |simd - scalar| <= 1e-5 * sum |w_i a_i|.
//
// The kernels are taken straight from install_avx2() / install_avx512(),
// so each override is
// compared with the scalar function it replaces whatever the dispatch table
// holds. Data: Gaussian rows with offsets (the minimum / offset terms),
// rows of extreme magnitudes, special values (zeros, NaN, infinities,
// subnormals, exact rounding ties), and weight blocks of random bytes with
// finite scales, which reach every bit pattern a file could hold.
// x86-64 only; each backend's tests are skipped, saying so, when the CPU
// lacks its instructions (AVX2, FMA and F16C; AVX-512 F/BW/VL and VNNI).
#if defined(__x86_64__)

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/quant.h"
#include "quant/simd.h"
#include "quant/test_util.h"

namespace revis {
namespace {

using quant_test::gaussian;
using quant_test::scalar_kernels;

// What a backend's install function overrides, type by type.
using KernelMap = std::map<TensorType, quant::KernelEntry>;
KernelMap* recording = nullptr;

KernelMap installed_kernels(void (*install)(quant::OverrideFn)) {
  KernelMap entries;
  recording = &entries;
  install([](TensorType type, const quant::KernelEntry& entry) {
    quant::KernelEntry& e = (*recording)[type];
    if (entry.dequantize) e.dequantize = entry.dequantize;
    if (entry.quantize) e.quantize = entry.quantize;
    if (entry.dot) e.dot = entry.dot;
    if (entry.dot4) e.dot4 = entry.dot4;
    if (entry.packed1) e.packed1 = entry.packed1;
    if (entry.packed4) e.packed4 = entry.packed4;
  });
  recording = nullptr;
  return entries;
}

const KernelMap& avx2_kernels() {
  static const KernelMap entries = installed_kernels(quant::install_avx2);
  return entries;
}

const KernelMap& avx512_kernels() {
  static const KernelMap entries = installed_kernels(quant::install_avx512);
  return entries;
}

const KernelMap& kernels_of(KernelBackend backend) {
  return backend == KernelBackend::kAvx512 ? avx512_kernels() : avx2_kernels();
}

class Avx2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!quant::avx2_supported()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  }
};

TEST_F(Avx2, DefaultIsTheBestBackendTheCpuHas) {
  const KernelBackend best = quant::avx512_supported() ? KernelBackend::kAvx512 : KernelBackend::kAvx2;
  std::printf("kernel backend: %s\n", kernel_backend_name(best));
  EXPECT_EQ(best_kernel_backend(), best);
  EXPECT_EQ(active_kernel_backend(), best);
  EXPECT_TRUE(kernel_backend_supported(KernelBackend::kAvx2));
  EXPECT_FALSE(kernel_backend_supported(KernelBackend::kNeon));
}

// The weight types with an AVX2 dot and dot4.
std::vector<TensorType> avx2_dot_types() {
  std::vector<TensorType> types = {TensorType::F32,  TensorType::F16,  TensorType::BF16,   TensorType::Q4_0,
                                   TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,   TensorType::Q8_0,
                                   TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K,   TensorType::Q5_K,
                                   TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4};
  for (TensorType type : quant_test::grid_types()) types.push_back(type);
  return types;
}

TEST_F(Avx2, OverridesTheListedKernels) {
  const auto& avx2 = avx2_kernels();
  for (TensorType type : {TensorType::Q8_0, TensorType::Q8_K, TensorType::F16}) {
    ASSERT_TRUE(avx2.count(type)) << type_name(type);
    EXPECT_NE(avx2.at(type).quantize, nullptr) << type_name(type);
  }
  EXPECT_NE(avx2.at(TensorType::F16).dequantize, nullptr);
  for (TensorType type : avx2_dot_types()) {
    ASSERT_TRUE(avx2.count(type)) << type_name(type);
    EXPECT_NE(avx2.at(type).dot, nullptr) << type_name(type);
    EXPECT_NE(avx2.at(type).dot4, nullptr) << type_name(type);
  }
  // The packed form of dot4 for the types with Q8_0 activations: octets, with
  // activation sums for the unsigned levels of Q4_1 and Q5_1.
  for (TensorType type : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0, TensorType::IQ4_NL, TensorType::Q4_1,
                          TensorType::Q5_1})
    EXPECT_NE(avx2.at(type).packed4, nullptr) << type_name(type);
  // The one-token form with activation sums and float scales: the sums
  // serve the types with unsigned levels, the scales all of them.
  for (TensorType type : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0, TensorType::IQ4_NL, TensorType::Q4_1,
                          TensorType::Q5_1})
    EXPECT_NE(avx2.at(type).packed1, nullptr) << type_name(type);
  // Q4_K's one token: Q8_K activations reordered to meet a chunk pair per vector.
  EXPECT_NE(avx2.at(TensorType::Q4_K).packed1, nullptr);
  // Q4_K's four tokens: stripes of eight rows.
  ASSERT_NE(avx2.at(TensorType::Q4_K).packed4, nullptr);
  EXPECT_EQ(avx2.at(TensorType::Q4_K).packed4->weight_rows, 8);
  // Q8_0's and Q4_0's four tokens: stripes of eight rows where AVX-VNNI is,
  // else octets; F16's: stripes of eight rows.
  EXPECT_EQ(avx2.at(TensorType::Q8_0).packed4->weight_rows, quant::avx_vnni_supported() ? 8 : 1);
  EXPECT_EQ(avx2.at(TensorType::Q4_0).packed4->weight_rows, quant::avx_vnni_supported() ? 8 : 1);
  ASSERT_NE(avx2.at(TensorType::F16).packed4, nullptr);
  EXPECT_EQ(avx2.at(TensorType::F16).packed4->weight_rows, 8);
}

TEST_F(Avx2, DispatchUsesTheOverrides) {
  ASSERT_TRUE(use_kernel_backend(KernelBackend::kAvx2).ok());
  const DotKernels q4k = dot_kernels(TensorType::Q4_K, 256);
  EXPECT_EQ(q4k.dot, avx2_kernels().at(TensorType::Q4_K).dot);
  EXPECT_EQ(q4k.dot4, avx2_kernels().at(TensorType::Q4_K).dot4);
  ASSERT_TRUE(use_kernel_backend(KernelBackend::kScalar).ok());
  const DotKernels scalar = dot_kernels(TensorType::Q4_K, 256);
  ASSERT_TRUE(use_kernel_backend(best_kernel_backend()).ok());
  EXPECT_EQ(scalar.dot, quant::dot_q4_k);
  EXPECT_EQ(scalar.dot4, nullptr);
}

class Avx512 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!quant::avx512_supported()) GTEST_SKIP() << "this CPU lacks AVX-512 F, BW, VL or VNNI";
  }
};

// The weight types with an AVX-512 dot and dot4 of their own.
std::vector<TensorType> avx512_dot_types() {
  std::vector<TensorType> types = {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q5_0, TensorType::Q2_K,
                                   TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K};
  for (TensorType type : quant_test::grid_types()) types.push_back(type);
  return types;
}

// AVX-512 starts from AVX2's table and replaces the heaviest dot products.
TEST_F(Avx512, ExtendsTheAvx2Table) {
  EXPECT_EQ(avx512_kernels().size(), avx2_kernels().size());
  for (TensorType type : avx512_dot_types()) {
    EXPECT_NE(avx512_kernels().at(type).dot, avx2_kernels().at(type).dot) << type_name(type);
    EXPECT_NE(avx512_kernels().at(type).dot4, avx2_kernels().at(type).dot4) << type_name(type);
  }
  EXPECT_EQ(avx512_kernels().at(TensorType::Q8_K).quantize, avx2_kernels().at(TensorType::Q8_K).quantize);
  for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q5_0})
    EXPECT_NE(avx512_kernels().at(type).packed4, avx2_kernels().at(type).packed4) << type_name(type);
  for (TensorType type :
       {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0, TensorType::Q4_0, TensorType::F16, TensorType::MXFP4}) {
    ASSERT_NE(avx512_kernels().at(type).packed4, nullptr) << type_name(type);
    EXPECT_EQ(avx512_kernels().at(type).packed4->weight_rows, 16) << type_name(type);
  }
  for (TensorType type : {TensorType::Q8_0, TensorType::Q5_0})
    EXPECT_NE(avx512_kernels().at(type).packed1, avx2_kernels().at(type).packed1) << type_name(type);
  // Q4_0's one token: AVX2's form with activation sums is the faster one.
  EXPECT_EQ(avx512_kernels().at(TensorType::Q4_0).packed1, avx2_kernels().at(TensorType::Q4_0).packed1);
  ASSERT_TRUE(use_kernel_backend(KernelBackend::kAvx512).ok());
  EXPECT_EQ(dot_kernels(TensorType::Q6_K, 256).dot, avx512_kernels().at(TensorType::Q6_K).dot);
}

// --- Bit-identical conversions -------------------------------------------------

// Odd and even (AVX-512 takes blocks in pairs), and past eight (AVX2's
// packed forms take them eight at a time, then one by one).
const int kBlockCounts[] = {1, 2, 3, 7, 13, 16, 27};

std::vector<uint8_t> quantized(quant::QuantizeFn fn, TensorType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(row_bytes(type, n), 0xa5);
  fn(x.data(), out.data(), n);
  return out;
}

void expect_same_quantization(TensorType type, const std::vector<float>& x, const std::string& what) {
  const std::vector<uint8_t> expected = quantized(scalar_kernels().at(type).quantize, type, x);
  const std::vector<uint8_t> actual = quantized(avx2_kernels().at(type).quantize, type, x);
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(static_cast<int>(expected[i]), static_cast<int>(actual[i]))
        << type_name(type) << ", " << what << ", n = " << x.size() << ": first difference at byte " << i << " of "
        << expected.size() << " (block bytes " << type_traits(type).block_bytes << ")";
  }
}

// Blocks of values that stress rounding, clamping and scale selection.
std::vector<std::vector<float>> special_blocks(int64_t block) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<float>> out;
  auto with = [&](std::initializer_list<std::pair<int64_t, float>> values, float fill = 0.0f) {
    std::vector<float> x(static_cast<size_t>(block), fill);
    for (auto [i, v] : values) x[static_cast<size_t>(i % block)] = v;
    out.push_back(x);
  };
  with({});                                             // all zeros
  with({{0, -0.0f}, {5, -0.0f}});                       // negative zeros
  with({{3, nan}});                                     // NaN among zeros
  with({{3, nan}, {9, 1.5f}, {10, -0.25f}});            // NaN among values
  with({{0, nan}}, nan);                                // only NaN
  with({{7, inf}, {8, 2.0f}});                          // infinity
  with({{7, -inf}, {1, 3.0f}, {2, nan}});               // -infinity and NaN
  with({{2, 3e38f}, {3, -1e38f}, {4, 1.0f}});           // near float max
  with({{2, 1e-42f}, {6, -3e-43f}}, 1e-45f);            // subnormals
  with({{5, 1e-30f}, {6, -2e-31f}});                    // tiny normals
  with({{1, -127.0f}, {4, 127.0f}, {8, 0.5f}, {9, 1.5f}, {10, -2.5f}, {11, 126.5f}});  // exact ties
  with({{1, 5.0f}, {2, -5.0f}, {3, 2.5f}, {4, -1.25f}});   // equal magnitudes, positive first
  with({{1, -5.0f}, {2, 5.0f}, {3, 2.5f}, {4, 1.25f}});    // equal magnitudes, negative first
  with({{0, 1.0f}}, -1.0f);                               // all of one magnitude
  // Everything at 1 except one value a rounding tie away from a level.
  std::vector<float> ties(static_cast<size_t>(block));
  for (int64_t i = 0; i < block; ++i) ties[static_cast<size_t>(i)] = static_cast<float>(i % 255 - 127) + 0.5f;
  ties[0] = 127.0f;
  out.push_back(ties);
  return out;
}

TEST_F(Avx2, ActivationQuantizationIsBitIdentical) {
  for (TensorType type : {TensorType::Q8_0, TensorType::Q8_K, TensorType::F16}) {
    const int64_t block = type == TensorType::F16 ? 32 : quant_test::block_size(type);
    uint32_t seed = 1;
    for (int blocks : kBlockCounts) {
      const size_t n = static_cast<size_t>(blocks * block);
      for (float sigma : {1.0f, 1e-3f, 1e3f, 1e-20f, 1e20f, 1e-39f}) {
        expect_same_quantization(type, gaussian(n, seed++, sigma), "gaussian sigma " + std::to_string(sigma));
      }
      // Blocks of very different magnitudes side by side.
      std::vector<float> mixed = gaussian(n, seed++);
      for (size_t i = 0; i < n; ++i) mixed[i] *= std::pow(10.0f, static_cast<float>(static_cast<int>(i / block) % 9 - 4) * 4);
      expect_same_quantization(type, mixed, "mixed magnitudes");
    }
    // Each special block alone and between ordinary ones.
    for (const std::vector<float>& special : special_blocks(block)) {
      expect_same_quantization(type, special, "special block");
      std::vector<float> x = gaussian(static_cast<size_t>(block), seed++);
      x.insert(x.end(), special.begin(), special.end());
      const std::vector<float> after = gaussian(static_cast<size_t>(block), seed++);
      x.insert(x.end(), after.begin(), after.end());
      expect_same_quantization(type, x, "special block in the middle");
    }
  }
}

TEST_F(Avx2, F16RowsOfAnyLengthAreBitIdentical) {
  for (size_t n : {1, 7, 8, 9, 15, 16, 17, 100, 1027}) {
    expect_same_quantization(TensorType::F16, gaussian(n, static_cast<uint32_t>(n), 100.0f), "odd length");
  }
  // Around the half range: largest finite, the rounding edge to infinity,
  // the smallest subnormal and half of it.
  expect_same_quantization(TensorType::F16,
                           {65504.0f, 65519.0f, 65520.0f, -65536.0f, 5.96e-8f, 2.98e-8f, 2.99e-8f, -1e-9f, 0.1f,
                            std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN()},
                           "range edges");
}

// Every half, in one long row and with an odd-length tail.
void expect_exact_f16_dequantize(quant::DequantizeFn convert) {
  for (size_t n : {size_t{65536}, size_t{65533}}) {
    std::vector<uint16_t> halves(n);
    for (size_t i = 0; i < n; ++i) halves[i] = static_cast<uint16_t>(i + (65536 - n));
    std::vector<float> expected(n), actual(n);
    quant::dequantize_f16(halves.data(), expected.data(), static_cast<int64_t>(n));
    convert(halves.data(), actual.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      // NaN payloads may be quieted by the hardware; a NaN must stay a NaN.
      if (std::isnan(expected[i])) {
        ASSERT_TRUE(std::isnan(actual[i])) << "half 0x" << std::hex << halves[i];
      } else {
        ASSERT_EQ(std::bit_cast<uint32_t>(expected[i]), std::bit_cast<uint32_t>(actual[i]))
            << "half 0x" << std::hex << halves[i];
      }
    }
  }
}

TEST_F(Avx2, F16DequantizeIsBitIdenticalForEveryHalf) {
  expect_exact_f16_dequantize(avx2_kernels().at(TensorType::F16).dequantize);
}

TEST_F(Avx512, F16DequantizeIsBitIdenticalForEveryHalf) {
  ASSERT_NE(avx512_kernels().at(TensorType::F16).dequantize, avx2_kernels().at(TensorType::F16).dequantize);
  expect_exact_f16_dequantize(avx512_kernels().at(TensorType::F16).dequantize);
}

// --- Dot products ------------------------------------------------------------------

// |avx2 - scalar| <= kTolerance * sum |w_i a_i|: the kernels do the same
// integer arithmetic and differ only in the order floats are summed.
constexpr double kTolerance = 1e-5;

// Random bytes with every half-precision scale field replaced by a
// moderate finite value: every bit pattern of levels, scales and minimums
// a file could hold, without infinities in the products.
std::vector<uint8_t> random_blocks(TensorType type, int64_t n, std::mt19937& rng) {
  const auto& grid = quant_test::grid_types();
  if (std::find(grid.begin(), grid.end(), type) != grid.end()) return quant_test::random_grid_row(type, n, rng);
  std::vector<uint8_t> bytes(row_bytes(type, n));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  auto scale = [&] { return static_cast<uint16_t>((rng() & 0x8000) | (0x1c00 + rng() % 0x1400)); };  // ~2^-8..2^2
  std::vector<size_t> fields;
  switch (type) {
    case TensorType::Q4_0: fields = {offsetof(quant::BlockQ4_0, d)}; break;
    case TensorType::Q4_1: fields = {offsetof(quant::BlockQ4_1, d), offsetof(quant::BlockQ4_1, m)}; break;
    case TensorType::Q5_0: fields = {offsetof(quant::BlockQ5_0, d)}; break;
    case TensorType::Q5_1: fields = {offsetof(quant::BlockQ5_1, d), offsetof(quant::BlockQ5_1, m)}; break;
    case TensorType::Q8_0: fields = {offsetof(quant::BlockQ8_0, d)}; break;
    case TensorType::Q2_K: fields = {offsetof(quant::BlockQ2_K, d), offsetof(quant::BlockQ2_K, dmin)}; break;
    case TensorType::Q3_K: fields = {offsetof(quant::BlockQ3_K, d)}; break;
    case TensorType::Q4_K: fields = {offsetof(quant::BlockQ4_K, d), offsetof(quant::BlockQ4_K, dmin)}; break;
    case TensorType::Q5_K: fields = {offsetof(quant::BlockQ5_K, d), offsetof(quant::BlockQ5_K, dmin)}; break;
    case TensorType::Q6_K: fields = {offsetof(quant::BlockQ6_K, d)}; break;
    case TensorType::IQ4_NL: fields = {offsetof(quant::BlockIQ4_NL, d)}; break;
    case TensorType::IQ4_XS: fields = {offsetof(quant::BlockIQ4_XS, d)}; break;
    case TensorType::MXFP4: {
      // A byte exponent, not a half: 2^-8..2^2 as for the others.
      for (size_t at = 0; at < bytes.size(); at += type_traits(type).block_bytes)
        bytes[at] = static_cast<uint8_t>(120 + rng() % 11);
      return bytes;
    }
    default: ADD_FAILURE() << "no scale layout for " << type_name(type);
  }
  const size_t block_bytes = type_traits(type).block_bytes;
  for (size_t at = 0; at < bytes.size(); at += block_bytes)
    for (size_t field : fields) {
      const uint16_t h = scale();
      std::memcpy(&bytes[at + field], &h, sizeof h);
    }
  return bytes;
}

std::vector<uint8_t> quantize_with_scalar(TensorType type, const std::vector<float>& x) {
  return quantized(scalar_kernels().at(type).quantize, type, x);
}

// A weight row from x where the type has a quantizer; random blocks (from
// the seed) for the grid types, which have none.
std::vector<uint8_t> weight_row(TensorType type, const std::vector<float>& x, uint32_t seed) {
  if (scalar_kernels().at(type).quantize) return quantize_with_scalar(type, x);
  std::mt19937 rng(seed);
  return random_blocks(type, static_cast<int64_t>(x.size()), rng);
}

std::vector<float> dequantize_with_scalar(TensorType type, const std::vector<uint8_t>& row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  scalar_kernels().at(type).dequantize(row.data(), out.data(), n);
  return out;
}

// One weight row against four activation rows of the activation type.
struct DotCase {
  std::string what;
  int64_t n;
  std::vector<uint8_t> w;
  std::vector<std::vector<uint8_t>> a;
};

void expect_dots_match(KernelBackend backend, TensorType type, const DotCase& c) {
  const TensorType a_type = activation_type(type);
  const quant_test::ScalarKernels& scalar = scalar_kernels().at(type);
  const quant::KernelEntry& simd = kernels_of(backend).at(type);
  const std::vector<float> w_values = dequantize_with_scalar(type, c.w, c.n);

  // dot4 reads rows a_stride apart: pad them to catch a stride mix-up.
  const size_t a_bytes = row_bytes(a_type, c.n), stride = a_bytes + 64;
  std::vector<uint8_t> packed(4 * stride, 0x7f);
  for (int k = 0; k < 4; ++k) std::memcpy(&packed[k * stride], c.a[k].data(), a_bytes);
  float four[4];
  simd.dot4(c.w.data(), packed.data(), stride, c.n, four);
  // The packed forms of dot4 and dot, where the backend has them, from the
  // same rows.
  auto packed_dots = [&](const PackedDot* form, int rows, int first) {
    std::vector<float> dots;
    if (!form) return dots;
    std::vector<uint8_t> packed_rows(form->bytes(c.n) + 64, 0x5a);  // the tail catches an overrun
    form->pack(packed.data() + first * stride, stride, c.n, packed_rows.data());
    EXPECT_TRUE(std::all_of(packed_rows.end() - 64, packed_rows.end(), [](uint8_t b) { return b == 0x5a; }));
    dots.resize(rows);
    if (!form->repack_weights) {
      form->dot(c.w.data(), packed_rows.data(), c.n, dots.data());
      return dots;
    }
    // The weight row in the kernel's own layout, then guarded the same way.
    // A form that takes stripes of rows gets a stripe one row short of
    // full, every row this one: each must come out with the same bits, and
    // the filled-up row as zero.
    const int stripe = form->weight_rows, copies = std::max(1, stripe - 1);
    std::vector<uint8_t> repacked(stripe * form->weight_bytes(c.n) + 64, 0x5a);
    form->repack_weights(c.w.data(), 0, copies, c.n, repacked.data());
    EXPECT_TRUE(std::all_of(repacked.end() - 64, repacked.end(), [](uint8_t b) { return b == 0x5a; }));
    std::vector<float> stripe_dots(static_cast<size_t>(rows * stripe));
    form->dot(repacked.data(), packed_rows.data(), c.n, stripe_dots.data());
    for (int k = 0; k < rows; ++k) {
      dots[k] = stripe_dots[k * stripe];
      for (int r = 1; r < stripe; ++r)
        EXPECT_EQ(std::bit_cast<uint32_t>(stripe_dots[k * stripe + r]), std::bit_cast<uint32_t>(r < copies ? dots[k] : 0.0f))
            << type_name(type) << ", " << c.what << ", stripe row " << r << ", activation row " << k;
    }
    if (stripe > 1) {
      // dot_one, the same stripe against the group's first row alone: the
      // same bits as dot's for every stripe row, zero rows too; and again
      // from a group whose other rows are random bytes (it reads row 0 only).
      EXPECT_NE(form->dot_one, nullptr) << type_name(type) << ": a stripe form without dot_one";
      if (!form->dot_one) return dots;
      std::vector<uint8_t> garbage(packed.begin() + first * stride, packed.end());
      std::mt19937 rng(static_cast<uint32_t>(c.n));
      for (int k = 1; k < rows; ++k)
        std::generate_n(garbage.begin() + k * stride, a_bytes, [&] { return static_cast<uint8_t>(rng()); });
      std::vector<uint8_t> garbage_rows(form->bytes(c.n));
      form->pack(garbage.data(), stride, c.n, garbage_rows.data());
      for (const uint8_t* group : {packed_rows.data(), garbage_rows.data()}) {
        const float unwritten = std::bit_cast<float>(0x7fc0beefu);  // a NaN dot_one must leave past its stripe
        std::vector<float> one(static_cast<size_t>(stripe + 16), unwritten);
        form->dot_one(repacked.data(), group, c.n, one.data());
        const char* what = group == packed_rows.data() ? "" : ", other rows random";
        for (int r = 0; r < stripe; ++r)
          EXPECT_EQ(std::bit_cast<uint32_t>(one[r]), std::bit_cast<uint32_t>(stripe_dots[r]))
              << type_name(type) << ", " << c.what << what << ", dot_one stripe row " << r;
        for (int r = stripe; r < stripe + 16; ++r)
          EXPECT_EQ(std::bit_cast<uint32_t>(one[r]), std::bit_cast<uint32_t>(unwritten))
              << type_name(type) << ", " << c.what << what << ", dot_one wrote past its stripe at " << r;
      }
    }
    return dots;
  };
  const std::vector<float> packed_four = packed_dots(simd.packed4, 4, 0);
  std::vector<float> packed_one;
  for (int k = 0; k < 4 && simd.packed1; ++k) packed_one.push_back(packed_dots(simd.packed1, 1, k)[0]);

  for (int k = 0; k < 4; ++k) {
    const std::vector<float> a_values = dequantize_with_scalar(a_type, c.a[k], c.n);
    double magnitude = 0;
    for (int64_t i = 0; i < c.n; ++i) magnitude += std::fabs(static_cast<double>(w_values[i]) * a_values[i]);
    const double expected = scalar.dot(c.w.data(), c.a[k].data(), c.n);
    const double one = simd.dot(c.w.data(), c.a[k].data(), c.n);
    ASSERT_TRUE(std::isfinite(expected)) << c.what;
    EXPECT_LE(std::fabs(one - expected), kTolerance * magnitude)
        << type_name(type) << ", " << c.what << ", n = " << c.n << ", row " << k << ": scalar " << expected
        << ", " << kernel_backend_name(backend) << " " << one;
    EXPECT_LE(std::fabs(four[k] - expected), kTolerance * magnitude)
        << type_name(type) << ", " << c.what << ", n = " << c.n << ", dot4 row " << k << ": scalar " << expected
        << ", " << kernel_backend_name(backend) << " " << four[k];
    if (!packed_four.empty()) {
      EXPECT_LE(std::fabs(packed_four[k] - expected), kTolerance * magnitude)
          << type_name(type) << ", " << c.what << ", n = " << c.n << ", packed dot4 row " << k << ": scalar "
          << expected << ", " << kernel_backend_name(backend) << " " << packed_four[k];
    }
    if (!packed_one.empty()) {
      EXPECT_LE(std::fabs(packed_one[k] - expected), kTolerance * magnitude)
          << type_name(type) << ", " << c.what << ", n = " << c.n << ", packed dot row " << k << ": scalar "
          << expected << ", " << kernel_backend_name(backend) << " " << packed_one[k];
    }
  }
}

class SimdDot : public ::testing::TestWithParam<std::tuple<KernelBackend, TensorType>> {
 protected:
  void SetUp() override {
    if (!kernel_backend_supported(std::get<0>(GetParam())))
      GTEST_SKIP() << "this CPU lacks " << kernel_backend_name(std::get<0>(GetParam()));
  }
};

TEST_P(SimdDot, MatchesScalarWithinRounding) {
  // Plain variables, not a structured binding: the lambdas below capture them (clang 14 cannot).
  const KernelBackend backend = std::get<0>(GetParam());
  const TensorType type = std::get<1>(GetParam());
  const TensorType a_type = activation_type(type);
  const int64_t block = quant_test::block_size(a_type);  // whole activation blocks
  std::vector<int64_t> lengths;
  for (int blocks : kBlockCounts) lengths.push_back(blocks * block);
  if (block == 1) lengths = {1, 7, 8, 9, 17, 255, 256, 257, 1000, 4099};  // the plain float types

  std::mt19937 rng(static_cast<uint32_t>(type) * 7919);
  uint32_t seed = 100;
  auto activations = [&](int64_t n, float sigma, float mean) {
    std::vector<std::vector<uint8_t>> a;
    for (int k = 0; k < 4; ++k) {
      std::vector<float> x = gaussian(static_cast<size_t>(n), seed++, sigma * static_cast<float>(k + 1));
      for (float& v : x) v += mean * sigma;
      a.push_back(quantize_with_scalar(a_type, x));
    }
    return a;
  };
  auto weights = [&](int64_t n, float sigma, float mean) {
    std::vector<float> x = gaussian(static_cast<size_t>(n), seed++, sigma);
    for (float& v : x) v += mean * sigma;
    return weight_row(type, x, seed);
  };

  // Magnitudes: half-precision types keep to what a half holds.
  const bool half_activations = a_type == TensorType::F16 || a_type == TensorType::Q8_0;
  const float a_large = half_activations ? 1e3f : 1e20f, a_small = half_activations ? 1e-3f : 1e-20f;
  for (int64_t n : lengths) {
    expect_dots_match(backend, type, {"gaussian", n, weights(n, 1.0f, 0.0f), activations(n, 1.0f, 0.0f)});
    expect_dots_match(backend, type, {"gaussian with offsets", n, weights(n, 1.0f, 0.4f), activations(n, 1.0f, -0.3f)});
    expect_dots_match(backend, type, {"large weights, small activations", n, weights(n, 1e3f, 0.2f), activations(n, a_small, 0.5f)});
    expect_dots_match(backend, type, {"small weights, large activations", n, weights(n, 1e-3f, -0.2f), activations(n, a_large, 0.0f)});
    // One outlier per row: most of each block quantizes to small levels.
    std::vector<float> spiky = gaussian(static_cast<size_t>(n), seed++);
    spiky[static_cast<size_t>(n / 2)] = 500.0f;
    expect_dots_match(backend, type, {"outlier weight", n, weight_row(type, spiky, seed), activations(n, 1.0f, 0.0f)});
    if (block > 1)  // random bits of a float type are NaNs and infinities too
      expect_dots_match(backend, type, {"random weight bytes", n, random_blocks(type, n, rng), activations(n, 1.0f, 0.1f)});
  }
}

std::string backend_and_type(const ::testing::TestParamInfo<std::tuple<KernelBackend, TensorType>>& info) {
  return std::string(kernel_backend_name(std::get<0>(info.param))) + "_" + type_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Avx2, SimdDot,
                         ::testing::Combine(::testing::Values(KernelBackend::kAvx2), ::testing::ValuesIn(avx2_dot_types())),
                         backend_and_type);
INSTANTIATE_TEST_SUITE_P(Avx512, SimdDot,
                         ::testing::Combine(::testing::Values(KernelBackend::kAvx512), ::testing::ValuesIn(avx512_dot_types())),
                         backend_and_type);
// The AVX-512 table keeps AVX2's dot and dot4 for MXFP4, with stripes of
// its own, whose rows expect_dots_match checks bit for bit against dot_one's.
INSTANTIATE_TEST_SUITE_P(Avx512Inherited, SimdDot,
                         ::testing::Combine(::testing::Values(KernelBackend::kAvx512),
                                            ::testing::Values(TensorType::MXFP4)),
                         backend_and_type);
// F16 keeps AVX2's dot and dot4 on AVX-512 but has a stripe form of its
// own there, whose rows expect_dots_match checks bit for bit against
// dot_one's.
INSTANTIATE_TEST_SUITE_P(Avx512Stripes, SimdDot,
                         ::testing::Combine(::testing::Values(KernelBackend::kAvx512), ::testing::Values(TensorType::F16)),
                         backend_and_type);

// vec_dot4 through the dispatch table against four vec_dot calls: equal on
// the scalar backend (which has no four-row kernel and loops), within
// rounding on AVX2 (whose four-row kernels fold the rows' integer sums
// before converting them, a different float summation order).
TEST_F(Avx2, VecDot4MatchesFourVecDots) {
  for (KernelBackend backend : {KernelBackend::kScalar, KernelBackend::kAvx2, KernelBackend::kAvx512}) {
    if (!kernel_backend_supported(backend)) continue;  // AVX-512: its own tests say it was skipped
    ASSERT_TRUE(use_kernel_backend(backend).ok());
    for (TensorType type : avx2_dot_types()) {
      const TensorType a_type = activation_type(type);
      const int64_t n = 3 * quant_test::block_size(a_type);
      const std::vector<uint8_t> w = weight_row(type, gaussian(static_cast<size_t>(n), 5), 5);
      const std::vector<float> w_values = dequantize_with_scalar(type, w, n);
      const size_t stride = row_bytes(a_type, n);
      std::vector<uint8_t> a(4 * stride);
      for (int k = 0; k < 4; ++k) {
        const std::vector<uint8_t> row = quantize_with_scalar(a_type, gaussian(static_cast<size_t>(n), 10 + k));
        std::memcpy(&a[k * stride], row.data(), stride);
      }
      float four[4];
      vec_dot4(type, w.data(), a.data(), stride, n, four);
      for (int k = 0; k < 4; ++k) {
        const float one = vec_dot(type, w.data(), &a[k * stride], n);
        if (backend == KernelBackend::kScalar) {
          EXPECT_EQ(four[k], one) << type_name(type) << " row " << k;
          continue;
        }
        const std::vector<uint8_t> row(a.begin() + k * stride, a.begin() + (k + 1) * stride);
        const std::vector<float> a_values = dequantize_with_scalar(a_type, row, n);
        double magnitude = 0;
        for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(static_cast<double>(w_values[i]) * a_values[i]);
        EXPECT_LE(std::fabs(static_cast<double>(four[k]) - one), kTolerance * magnitude)
            << type_name(type) << " row " << k << ": dot4 " << four[k] << ", dot " << one;
      }
    }
  }
  ASSERT_TRUE(use_kernel_backend(best_kernel_backend()).ok());
}

}  // namespace
}  // namespace revis

#endif
