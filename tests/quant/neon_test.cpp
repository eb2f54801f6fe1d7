// The NEON kernels (simd_neon.cpp) against the scalar reference kernels, on
// random data and odd block counts: activation quantization and F16 rows
// must be bit-identical, dot products equal within float summation-order
// rounding, |neon - scalar| <= 1e-5 * sum |w_i a_i|.
//
// The kernels are taken straight from install_neon(), so every override is
// compared with the scalar function it replaces, whatever the dispatch table
// currently holds. AArch64 only: elsewhere this file compiles to nothing (the
// cross build and QEMU run of scripts/test-arm64.sh exercise it on x86 hosts).
#if defined(__aarch64__)

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <type_traits>
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

// What install_neon() overrides, type by type.
std::map<TensorType, quant::KernelEntry>& recorded() {
  static std::map<TensorType, quant::KernelEntry> entries;
  return entries;
}

const std::map<TensorType, quant::KernelEntry>& neon_kernels() {
  static const bool installed = [] {
    quant::install_neon([](TensorType type, const quant::KernelEntry& entry) { recorded()[type] = entry; });
    return true;
  }();
  (void)installed;
  return recorded();
}

// Read before any test can switch backends: what the first kernel call gets.
const KernelBackend kStartupBackend = active_kernel_backend();

TEST(Neon, IsTheBackendInUse) {
#if defined(__ARM_FEATURE_DOTPROD)
  const char* integer_dot = "SDOT (dotprod extension)";
#else
  const char* integer_dot = "widening multiplies (baseline ARMv8.0)";
#endif
  std::printf("kernel backend: %s, integer dots by %s\n", kernel_backend_name(kStartupBackend), integer_dot);
  RecordProperty("kernel_backend", kernel_backend_name(kStartupBackend));
  EXPECT_EQ(best_kernel_backend(), KernelBackend::kNeon);
  EXPECT_EQ(kStartupBackend, KernelBackend::kNeon);
  EXPECT_EQ(active_kernel_backend(), KernelBackend::kNeon);
}

TEST(Neon, OverridesTheHotKernels) {
  const auto& neon = neon_kernels();
  for (TensorType type : {TensorType::Q8_0, TensorType::Q8_K, TensorType::F16}) {
    ASSERT_TRUE(neon.count(type)) << type_name(type);
    EXPECT_NE(neon.at(type).quantize, nullptr) << type_name(type);
  }
  std::vector<TensorType> dot_types = {TensorType::F16,  TensorType::Q4_0, TensorType::Q8_0,
                                       TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K};
  for (TensorType type : quant_test::grid_types()) dot_types.push_back(type);
  for (TensorType type : dot_types) {
    ASSERT_TRUE(neon.count(type)) << type_name(type);
    EXPECT_NE(neon.at(type).dot, nullptr) << type_name(type);
    EXPECT_NE(neon.at(type).dot4, nullptr) << type_name(type);
  }
}

// --- Bit-identical conversions ------------------------------------------------

const int kBlockCounts[] = {1, 3, 7, 13};

std::vector<uint8_t> quantized(quant::QuantizeFn fn, TensorType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(row_bytes(type, n), 0xa5);
  fn(x.data(), out.data(), n);
  return out;
}

void expect_same_quantization(TensorType type, const std::vector<float>& x, const std::string& what) {
  const auto& neon = neon_kernels().at(type);
  ASSERT_NE(neon.quantize, nullptr);
  const std::vector<uint8_t> ours = quantized(neon.quantize, type, x);
  const std::vector<uint8_t> reference = quantized(scalar_kernels().at(type).quantize, type, x);
  ASSERT_EQ(ours.size(), reference.size());
  for (size_t i = 0; i < ours.size(); ++i)
    ASSERT_EQ(ours[i], reference[i]) << type_name(type) << ", " << what << ": byte " << i << " of " << ours.size();
}

// Rows whose quantization has a corner to get wrong, `block` values each.
std::vector<std::pair<std::string, std::vector<float>>> corner_rows(int64_t block, float long_end) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::pair<std::string, std::vector<float>>> rows;
  auto add = [&](const std::string& name, std::vector<float> x) { rows.emplace_back(name, std::move(x)); };
  add("zeros", std::vector<float>(block, 0.0f));
  add("negative zeros", std::vector<float>(block, -0.0f));
  // The extreme maps to +-127 with a unit scale: every other value k + 0.5
  // is a rounding tie, which must go to the even neighbour.
  for (float extreme : {127.0f, -127.0f, long_end}) {
    std::vector<float> x(block);
    for (int64_t i = 0; i < block; ++i) x[i] = static_cast<float>(i % 41) - 20.5f;
    x[block / 3] = extreme;
    add("ties, extreme " + std::to_string(extreme), x);
  }
  // Equal magnitudes of both signs: the first one found sets the sign.
  for (float sign : {1.0f, -1.0f}) {
    std::vector<float> x = gaussian(block, 7);
    x[5] = 9 * sign;
    x[block - 2] = -9 * sign;
    add("tied extremes", x);
  }
  for (float special : {nan, inf, -inf}) {
    std::vector<float> x = gaussian(block, 11);
    x[block / 2] = special;
    add("one special value " + std::to_string(special), x);
  }
  add("all NaN", std::vector<float>(block, nan));
  std::vector<float> tiny = gaussian(block, 13, 1e-40f);  // float subnormals
  add("subnormal", tiny);
  add("huge", gaussian(block, 17, 1e37f));
  return rows;
}

TEST(Neon, ActivationQuantizationIsBitIdentical) {
  for (TensorType type : {TensorType::Q8_0, TensorType::Q8_K}) {
    const int64_t block = quant_test::block_size(type);
    uint32_t seed = 100;
    for (int blocks : kBlockCounts)
      for (float sigma : {1e-6f, 1.0f, 3e4f}) {
        std::vector<float> x = gaussian(static_cast<size_t>(blocks * block), seed++, sigma);
        for (size_t i = 0; i < x.size(); i += 5) x[i] += sigma * 0.3f;  // skew the sign of the extreme
        expect_same_quantization(type, x, std::to_string(blocks) + " blocks, sigma " + std::to_string(sigma));
      }
    // Every corner case as one block between ordinary ones, so a kernel that
    // lets one block's state leak into the next is caught too.
    const float long_end = type == TensorType::Q8_K ? -128.0f : 127.0f;
    for (const auto& [name, corner] : corner_rows(block, long_end)) {
      std::vector<float> x = gaussian(static_cast<size_t>(block), seed++);
      x.insert(x.end(), corner.begin(), corner.end());
      const std::vector<float> after = gaussian(static_cast<size_t>(block), seed++);
      x.insert(x.end(), after.begin(), after.end());
      expect_same_quantization(type, x, name);
    }
  }
}

TEST(Neon, F16RowsAreBitIdentical) {
  // Every half, at an offset that leaves a tail for the scalar remainder.
  std::vector<uint16_t> halves(65536 + 5);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i + 65531);
  const int64_t n = static_cast<int64_t>(halves.size());
  std::vector<float> ours(halves.size()), reference(halves.size());
  neon_kernels().at(TensorType::F16).dequantize(halves.data(), ours.data(), n);
  scalar_kernels().at(TensorType::F16).dequantize(halves.data(), reference.data(), n);
  for (size_t i = 0; i < halves.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(ours[i]), std::bit_cast<uint32_t>(reference[i])) << "half 0x" << std::hex
                                                                                         << halves[i];

  // Floats of every exponent and payload, plus the rounding boundaries.
  std::mt19937 engine(5);
  std::vector<float> x;
  for (int i = 0; i < 200003; ++i) x.push_back(std::bit_cast<float>(static_cast<uint32_t>(engine())));
  for (float v : {65504.0f, 65519.996f, 65520.0f, 0x1p-24f, 0x1.8p-25f, 0x1p-25f, 0x1.000002p-25f, 0x1.ffcp-15f,
                  0x1.ffep-15f, 1.0009766f, 1.00048828125f, 1.000732421875f, -0.0f})
    x.push_back(v);
  std::vector<uint16_t> h_ours(x.size()), h_reference(x.size());
  neon_kernels().at(TensorType::F16).quantize(x.data(), h_ours.data(), static_cast<int64_t>(x.size()));
  scalar_kernels().at(TensorType::F16).quantize(x.data(), h_reference.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(h_ours[i], h_reference[i]) << "float 0x" << std::hex << std::bit_cast<uint32_t>(x[i]);
}

// --- Dot products ---------------------------------------------------------------

constexpr double kTolerance = 1e-5;

// Overwrites every block's float scales of a row of random bytes with
// moderate halves, so random bit patterns exercise every level and packed
// integer scale while the products stay finite.
template <typename Block>
void sane_scales(uint8_t* bytes, int64_t blocks, std::mt19937& engine) {
  std::uniform_real_distribution<float> magnitude(1e-3f, 1e-1f);
  auto scale = [&] { return fp32_to_fp16((engine() & 1 ? -1.0f : 1.0f) * magnitude(engine)); };
  auto* b = reinterpret_cast<Block*>(bytes);
  for (int64_t i = 0; i < blocks; ++i) {
    if constexpr (std::is_same_v<Block, quant::BlockQ8_K>) {
      b[i].d = magnitude(engine);
      for (int s = 0; s < 16; ++s) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) sum += b[i].qs[16 * s + j];
        b[i].bsums[s] = static_cast<int16_t>(sum);
      }
    } else if constexpr (std::is_same_v<Block, quant::BlockMXFP4>) {
      b[i].e = static_cast<uint8_t>(118 + engine() % 8);  // 2^-10..2^-3, as the halves above
    } else {
      b[i].d = scale();
      if constexpr (requires { b[i].dmin; }) b[i].dmin = scale();
      if constexpr (requires { b[i].m; }) b[i].m = scale();
    }
  }
}

void sanitize(TensorType type, std::vector<uint8_t>& row, std::mt19937& engine) {
  const int64_t blocks = static_cast<int64_t>(row.size() / type_traits(type).block_bytes);
  uint8_t* p = row.data();
  switch (type) {
    case TensorType::Q4_0: return sane_scales<quant::BlockQ4_0>(p, blocks, engine);
    case TensorType::Q4_1: return sane_scales<quant::BlockQ4_1>(p, blocks, engine);
    case TensorType::Q5_0: return sane_scales<quant::BlockQ5_0>(p, blocks, engine);
    case TensorType::Q5_1: return sane_scales<quant::BlockQ5_1>(p, blocks, engine);
    case TensorType::Q8_0: return sane_scales<quant::BlockQ8_0>(p, blocks, engine);
    case TensorType::Q2_K: return sane_scales<quant::BlockQ2_K>(p, blocks, engine);
    case TensorType::Q3_K: return sane_scales<quant::BlockQ3_K>(p, blocks, engine);
    case TensorType::Q4_K: return sane_scales<quant::BlockQ4_K>(p, blocks, engine);
    case TensorType::Q5_K: return sane_scales<quant::BlockQ5_K>(p, blocks, engine);
    case TensorType::Q6_K: return sane_scales<quant::BlockQ6_K>(p, blocks, engine);
    case TensorType::Q8_K: return sane_scales<quant::BlockQ8_K>(p, blocks, engine);
    case TensorType::IQ4_NL: return sane_scales<quant::BlockIQ4_NL>(p, blocks, engine);
    case TensorType::IQ4_XS: return sane_scales<quant::BlockIQ4_XS>(p, blocks, engine);
    case TensorType::MXFP4: return sane_scales<quant::BlockMXFP4>(p, blocks, engine);
    default: FAIL() << "no random-bits layout for " << type_name(type);
  }
}

struct Row {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // as the scalar kernel dequantizes them
};

// A row of `type`: quantized from Gaussian values (shifted by `mean`, which
// exercises the offset and minimum terms), or random bytes with sane scales
// (always for the grid types, whose random blocks hold every point, sign
// and scale).
Row make_row(TensorType type, int64_t n, uint32_t seed, float mean, bool random_bits) {
  const quant_test::ScalarKernels& scalar = scalar_kernels().at(type);
  const auto& grid = quant_test::grid_types();
  Row row;
  row.bytes.resize(row_bytes(type, n));
  if (std::find(grid.begin(), grid.end(), type) != grid.end()) {
    std::mt19937 engine(seed);
    row.bytes = quant_test::random_grid_row(type, n, engine);
  } else if (random_bits) {
    std::mt19937 engine(seed);
    for (uint8_t& byte : row.bytes) byte = static_cast<uint8_t>(engine());
    sanitize(type, row.bytes, engine);
  } else {
    std::vector<float> x = gaussian(static_cast<size_t>(n), seed);
    for (float& v : x) v += mean;
    scalar.quantize(x.data(), row.bytes.data(), n);
  }
  row.values.resize(static_cast<size_t>(n));
  scalar.dequantize(row.bytes.data(), row.values.data(), n);
  return row;
}

// One dot-product case: a weight row and four activation rows of n values.
struct DotCase {
  std::string what;
  int64_t n;
  Row w;
  Row a[4];
};

// Odd block counts for the quantized types; for float rows, lengths around
// the vector width and chunk size so that every tail is taken. Each length
// with centred rows, rows with offsets (which exercise Q4_1's m and the
// K-quants' minimums against the activation sums) and, for quantized types,
// random bytes with finite scales (every level and packed scale pattern).
std::vector<DotCase> dot_cases(TensorType type) {
  const TensorType a_type = activation_type(type);
  const bool float_type = quant_test::block_size(type) == 1;
  std::vector<int64_t> lengths;
  if (float_type) {
    lengths = {1, 7, 15, 16, 17, 255, 257, 1000, 4099};
  } else {
    const int64_t block = quant_test::block_size(a_type);  // holds whole weight blocks
    for (int blocks : {1, 3, 7, 13, 33}) lengths.push_back(blocks * block);
  }
  std::vector<DotCase> cases;
  uint32_t seed = 1;
  for (int64_t n : lengths)
    for (int variant = 0; variant < (float_type ? 3 : 4); ++variant) {
      const bool random_bits = variant == 3;
      const float w_mean = variant == 1 ? 0.4f : variant == 2 ? -0.2f : 0.0f;
      const float a_mean = variant == 1 ? -0.3f : variant == 2 ? 0.6f : 0.0f;
      DotCase c;
      c.what = "n = " + std::to_string(n) + (random_bits ? ", random bytes" : ", mean " + std::to_string(w_mean));
      c.n = n;
      c.w = make_row(type, n, seed++, w_mean, random_bits);
      for (Row& a : c.a) a = make_row(a_type, n, 1000 + seed++, a_mean, random_bits);
      cases.push_back(std::move(c));
    }
  return cases;
}

// kTolerance * sum |w_i a_i| over the values the two rows stand for.
double bound(const Row& w, const Row& a) {
  double magnitude = 0;
  for (size_t i = 0; i < w.values.size(); ++i) magnitude += std::fabs(static_cast<double>(w.values[i]) * a.values[i]);
  EXPECT_TRUE(std::isfinite(magnitude));
  return kTolerance * magnitude + 1e-30;
}

class NeonDot : public ::testing::TestWithParam<TensorType> {
 protected:
  void SetUp() override {
    const auto& neon = neon_kernels();
    if (!neon.count(GetParam()) || neon.at(GetParam()).dot == nullptr)
      GTEST_SKIP() << "no NEON dot for " << type_name(GetParam());
  }
};

TEST_P(NeonDot, OneRowMatchesScalarWithinRounding) {
  const TensorType type = GetParam();
  const quant::DotFn ours = neon_kernels().at(type).dot;
  const quant::DotFn reference = scalar_kernels().at(type).dot;
  for (const DotCase& c : dot_cases(type)) {
    const double expected = reference(c.w.bytes.data(), c.a[0].bytes.data(), c.n);
    const double got = ours(c.w.bytes.data(), c.a[0].bytes.data(), c.n);
    EXPECT_LE(std::fabs(got - expected), bound(c.w, c.a[0]))
        << type_name(type) << ", " << c.what << ": neon " << got << ", scalar " << expected;
  }
}

TEST_P(NeonDot, FourRowsMatchScalarWithinRounding) {
  const TensorType type = GetParam();
  const quant::Dot4Fn ours = neon_kernels().at(type).dot4;
  if (ours == nullptr) GTEST_SKIP() << "no NEON dot4 for " << type_name(type);
  const quant::DotFn reference = scalar_kernels().at(type).dot;
  for (const DotCase& c : dot_cases(type)) {
    // Rows further apart than their length, with poison between them, so a
    // kernel that mixes up the stride and the row length reads garbage.
    const size_t length = c.a[0].bytes.size();
    const size_t stride = length + 40;
    std::vector<uint8_t> packed(4 * stride, 0xee);
    for (int k = 0; k < 4; ++k) std::memcpy(packed.data() + k * stride, c.a[k].bytes.data(), length);
    float four[4];
    ours(c.w.bytes.data(), packed.data(), stride, c.n, four);
    for (int k = 0; k < 4; ++k) {
      const double expected = reference(c.w.bytes.data(), c.a[k].bytes.data(), c.n);
      EXPECT_LE(std::fabs(four[k] - expected), bound(c.w, c.a[k]))
          << type_name(type) << ", " << c.what << ", row " << k << ": neon " << four[k] << ", scalar " << expected;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, NeonDot, ::testing::ValuesIn(quant_test::weight_types()), quant_test::TypeName());
INSTANTIATE_TEST_SUITE_P(GridTypes, NeonDot, ::testing::ValuesIn(quant_test::grid_types()), quant_test::TypeName());

// Through the public entry points too: vec_dot and quantize_row with the
// NEON backend agree with the scalar backend (the overrides are wired to the
// right types), and switching back restores NEON.
TEST(Neon, DispatchUsesTheOverrides) {
  const int64_t n = 7 * 256;
  const std::vector<float> x = gaussian(static_cast<size_t>(n), 77);
  for (TensorType type : quant_test::weight_types()) {
    const TensorType a_type = activation_type(type);
    const Row w = make_row(type, n, 78, 0.1f, false);
    std::vector<uint8_t> a(row_bytes(a_type, n));
    ASSERT_TRUE(use_kernel_backend(KernelBackend::kScalar).ok());
    quantize_row(a_type, x.data(), a.data(), n);
    const float scalar = vec_dot(type, w.bytes.data(), a.data(), n);
    ASSERT_TRUE(use_kernel_backend(KernelBackend::kNeon).ok());
    std::vector<uint8_t> a_neon(a.size());
    quantize_row(a_type, x.data(), a_neon.data(), n);
    EXPECT_EQ(a_neon, a) << type_name(a_type);
    const float neon = vec_dot(type, w.bytes.data(), a.data(), n);
    double magnitude = 0;
    std::vector<float> a_values(static_cast<size_t>(n));
    scalar_kernels().at(a_type).dequantize(a.data(), a_values.data(), n);
    for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(static_cast<double>(w.values[i]) * a_values[i]);
    EXPECT_LE(std::fabs(static_cast<double>(neon) - scalar), kTolerance * magnitude) << type_name(type);
  }
  EXPECT_EQ(active_kernel_backend(), KernelBackend::kNeon);
}

}  // namespace
}  // namespace revis

#endif  // __aarch64__
