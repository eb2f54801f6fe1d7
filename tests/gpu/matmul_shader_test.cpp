// The matmul shader of every weight type against the CPU's reference
// (dequantize, then dot in double), on odd shapes: rows that are fewer
// groups of 32 than the workgroup has threads, an odd row count, and 1, 7
// and 9 tokens (a partial tile of eight, and one past it). And batch
// invariance: a token's row is the same bits alone and among others. Each
// in both builds of the shader: subgroup arithmetic (lavapipe has it) and
// shared memory only. And the layers (DeviceLayers) take a matrix of every
// weight type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "gpu_test_device.h"
#include "model/device_layers.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace revis {
namespace {

struct ShaderType {
  TensorType type;
  std::string kernel;      // "matmul_" and the type's name in lower case
  bool subgroups = false;  // DeviceOptions::subgroups
};

std::string case_name(const ShaderType& t) { return t.kernel + (t.subgroups ? "_subgroups" : "_shared_memory"); }

// ctest's list names a case by its kernel and build, not by the struct's bytes.
void PrintTo(const ShaderType& t, std::ostream* os) { *os << case_name(t); }

// Every type a weight may have: each GGUF type id revis knows, less the
// activations' Q8_1 and Q8_K and the integer tables. A type added to
// types.h is thus tested here, and fails until it has a shader.
std::vector<ShaderType> weight_types() {
  std::vector<ShaderType> types;
  for (uint32_t id = 0; id < 256; ++id) {
    const TypeTraits* traits = type_traits(id);
    const auto type = static_cast<TensorType>(id);
    if (!traits || type == TensorType::Q8_1 || type == TensorType::Q8_K || type == TensorType::I32) continue;
    std::string kernel = std::string("matmul_") + traits->name;
    std::transform(kernel.begin(), kernel.end(), kernel.begin(), [](unsigned char c) { return std::tolower(c); });
    types.push_back({type, kernel});
  }
  return types;
}

// Every weight type in both builds of the shader.
std::vector<ShaderType> shader_cases() {
  std::vector<ShaderType> cases;
  for (bool subgroups : {true, false})
    for (ShaderType t : weight_types()) {
      t.subgroups = subgroups;
      cases.push_back(t);
    }
  return cases;
}

TEST(EveryWeightType, HasAShaderAndGoesToTheDevice) {
  if (!gpu::built_with_vulkan()) GTEST_SKIP() << "built without Vulkan";
  for (const ShaderType& t : weight_types()) {
    EXPECT_FALSE(gpu::shader_code(t.kernel).empty()) << t.kernel;
    const int64_t cols = std::max<int64_t>(type_traits(t.type).block_size, 32);
    const uint8_t byte = 0;
    const Matrix m{.type = t.type, .cols = cols, .rows = 1, .row_bytes = row_bytes(t.type, cols), .data = &byte};
    EXPECT_EQ(DeviceLayers::unreadable(m, gpu::DeviceInfo{}), "") << type_name(t.type);
  }
}

struct MatmulPush {
  uint32_t rows, cols, tokens, row_bytes, x_offset, x_stride, o_offset, o_stride, w_offset;
};

class MatmulShader : public ::testing::TestWithParam<ShaderType> {
 protected:
  void SetUp() override {
    REVIS_REQUIRE_GPU();
    auto d = gpu::Device::open(0, {.subgroups = GetParam().subgroups});
    ASSERT_TRUE(d.ok()) << d.status().message();
    device_ = std::move(*d);
    ASSERT_EQ(device_->uses_subgroups(), GetParam().subgroups && device_->info().subgroup_arithmetic);
  }

  // out[t][r] on the device for a random matrix of `rows` x `cols` and
  // `tokens` random rows of x; `reference` gets the CPU's values.
  std::vector<float> run(int rows, int cols, int tokens, std::vector<double>& reference, uint32_t seed) {
    const TensorType type = GetParam().type;
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const size_t rb = row_bytes(type, cols);
    std::vector<uint8_t> w(rb * rows);
    std::vector<float> row(cols), dequant(static_cast<size_t>(rows) * cols), ones(cols, 1.0f);
    for (int r = 0; r < rows; ++r) {
      for (float& v : row) v = normal(rng);
      // The IQ1/IQ2 quantizers need an importance: every value weighs the same.
      if (quantize_needs_importance(type))
        quantize_row_with_importance(type, row.data(), &w[r * rb], cols, ones.data());
      else
        quantize_row(type, row.data(), &w[r * rb], cols);
      dequantize_row(type, &w[r * rb], &dequant[static_cast<size_t>(r) * cols], cols);
    }
    std::vector<float> x(static_cast<size_t>(tokens) * cols);
    for (float& v : x) v = normal(rng);
    reference.assign(static_cast<size_t>(tokens) * rows, 0.0);
    for (int t = 0; t < tokens; ++t)
      for (int r = 0; r < rows; ++r)
        for (int i = 0; i < cols; ++i)
          reference[t * rows + r] += double(dequant[static_cast<size_t>(r) * cols + i]) * x[t * cols + i];

    auto wb = device_->allocate(w.size(), "weights");
    auto xb = device_->allocate(x.size() * 4, "x");
    auto ob = device_->allocate(static_cast<size_t>(tokens) * rows * 4, "out");
    // The grid types read their points from the CPU's tables, bound at 3.
    const std::span<const std::byte> points = grid_bytes(type);
    auto gb = device_->allocate(std::max<size_t>(points.size_bytes(), 4), "grid");
    EXPECT_TRUE(wb.ok() && xb.ok() && ob.ok() && gb.ok());
    EXPECT_TRUE(device_->write(*wb, 0, w.data(), w.size()).ok());
    EXPECT_TRUE(device_->write(*xb, 0, x.data(), x.size() * 4).ok());
    if (!points.empty()) {
      EXPECT_TRUE(device_->write(*gb, 0, points.data(), points.size_bytes()).ok());
    }
    const MatmulPush p{static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), static_cast<uint32_t>(tokens),
                       static_cast<uint32_t>(rb), 0, static_cast<uint32_t>(cols), 0, static_cast<uint32_t>(rows), 0};
    device_->begin();
    device_->dispatch(GetParam().kernel, {&*wb, &*xb, &*ob, &*gb}, &p, sizeof p, rows);
    Status s = device_->run();
    EXPECT_TRUE(s.ok()) << s.message();
    std::vector<float> out(static_cast<size_t>(tokens) * rows);
    EXPECT_TRUE(device_->read(*ob, 0, out.data(), out.size() * 4).ok());
    return out;
  }

  std::unique_ptr<gpu::Device> device_;
};

TEST_P(MatmulShader, MatchesTheCpuReferenceOnOddShapes) {
  const int block = static_cast<int>(type_traits(GetParam().type).block_size);
  // K-quants: one block and three (fewer groups than threads, and more
  // than one block); the rest: 3 groups and 70 (more groups than threads).
  for (const int cols : {std::max(block, 96), std::max(block, 32) * (block == 256 ? 3 : 70)})
    for (const int tokens : {1, 7, 9}) {
      std::vector<double> reference;
      const int rows = 13;
      const std::vector<float> out = run(rows, cols, tokens, reference, cols * 31 + tokens);
      for (size_t i = 0; i < out.size(); ++i) {
        const double tolerance = 1e-4 * std::sqrt(static_cast<double>(cols)) * 4;
        ASSERT_NEAR(out[i], reference[i], tolerance) << "cols " << cols << " tokens " << tokens << " element " << i;
      }
    }
}

TEST_P(MatmulShader, ATokensRowIsTheSameBitsAloneAndAmongOthers) {
  const int cols = 256 * 2, rows = 5;
  std::vector<double> unused;
  // The same seed gives the same weights and the same first token.
  const std::vector<float> among = run(rows, cols, 9, unused, 7);
  const std::vector<float> alone = run(rows, cols, 1, unused, 7);
  for (int r = 0; r < rows; ++r) EXPECT_EQ(alone[r], among[r]) << "row " << r;
}

INSTANTIATE_TEST_SUITE_P(EveryType, MatmulShader, ::testing::ValuesIn(shader_cases()),
                         [](const auto& info) { return case_name(info.param); });

}  // namespace
}  // namespace revis
