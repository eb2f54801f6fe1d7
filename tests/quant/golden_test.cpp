// Dequantization against llama.cpp's own output: for every type in
// testdata/quant/manifest.json and testdata/moe2bit/quant/manifest.json (the
// grid types), tensor "t" of TYPE.gguf must dequantize to exactly the floats
// in TYPE.f32, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/test_util.h"

namespace revis {
namespace {

const std::string kQuantDir = std::string(REVIS_TESTDATA_DIR) + "/quant/";
const std::string kGridQuantDir = std::string(REVIS_TESTDATA_DIR) + "/moe2bit/quant/";

nlohmann::json load_manifest(const std::string& dir) {
  std::ifstream in(dir + "manifest.json");
  if (!in) return nlohmann::json::array();
  return nlohmann::json::parse(in);
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const auto bytes = static_cast<size_t>(in.tellg());
  std::vector<float> values(bytes / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  return values;
}

// Distance in units in the last place between two finite floats of the same sign.
int64_t ulps_apart(float a, float b) {
  return std::abs(static_cast<int64_t>(std::bit_cast<int32_t>(a)) - std::bit_cast<int32_t>(b));
}

class Golden : public ::testing::TestWithParam<TensorType> {};

TEST_P(Golden, DequantizesBitExactly) {
  const char* name = type_name(GetParam());
  nlohmann::json entry;
  std::string dir;
  for (const std::string& candidate : {kQuantDir, kGridQuantDir}) {
    const nlohmann::json manifest = load_manifest(candidate);
    ASSERT_FALSE(manifest.empty()) << "missing " << candidate << "manifest.json";
    for (const auto& e : manifest)
      if (e.at("type").get<std::string>() == name) {
        entry = e;
        dir = candidate;
      }
  }
  ASSERT_FALSE(dir.empty()) << "no manifest has an entry for " << name;

  auto file = gguf::GgufFile::open(dir + entry.at("file").get<std::string>());
  ASSERT_TRUE(file.ok()) << file.status().message();
  const gguf::TensorInfo* tensor = (*file)->tensor(entry.at("tensor").get<std::string>());
  ASSERT_NE(tensor, nullptr);
  ASSERT_EQ(tensor->type, GetParam());
  const int64_t cols = entry.at("cols").get<int64_t>();
  const int64_t rows = entry.at("rows").get<int64_t>();
  ASSERT_EQ(tensor->dims, (std::vector<int64_t>{cols, rows}));

  const std::vector<float> expected = read_floats(dir + entry.at("dequantized").get<std::string>());
  ASSERT_EQ(expected.size(), static_cast<size_t>(rows * cols));

  const size_t stride = row_bytes(GetParam(), cols);
  ASSERT_EQ(tensor->n_bytes, stride * static_cast<size_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  int64_t mismatches = 0;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(GetParam(), tensor->data + r * stride, row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      const float want = expected[static_cast<size_t>(r * cols + c)];
      if (std::bit_cast<uint32_t>(row[c]) == std::bit_cast<uint32_t>(want)) continue;
      if (++mismatches <= 5)
        ADD_FAILURE() << name << " row " << r << " col " << c << ": got " << row[c] << " want " << want << " ("
                      << ulps_apart(row[c], want) << " ulp)";
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << rows * cols << " values";
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Golden,
                         ::testing::Values(TensorType::F16, TensorType::BF16, TensorType::Q8_0, TensorType::Q4_0,
                                           TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q2_K,
                                           TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
                                           TensorType::IQ4_NL, TensorType::IQ4_XS),
                         quant_test::TypeName());
INSTANTIATE_TEST_SUITE_P(GridTypes, Golden, ::testing::ValuesIn(quant_test::grid_types()), quant_test::TypeName());

// A type added to the test data without a test here would go unchecked.
TEST(GoldenManifest, EveryEntryIsTested) {
  const nlohmann::json manifest = load_manifest(kQuantDir);
  ASSERT_FALSE(manifest.empty());
  for (const auto& e : manifest) {
    const auto type = type_from_name(e.at("type").get<std::string>());
    ASSERT_TRUE(type.has_value()) << e.at("type");
    EXPECT_TRUE(can_dequantize(*type)) << e.at("type");
    EXPECT_NE(*type, TensorType::F32) << "add F32 to the Golden instantiation";
  }
  EXPECT_EQ(manifest.size(), 14u) << "update the Golden instantiation's type list";
  const nlohmann::json grid_manifest = load_manifest(kGridQuantDir);
  ASSERT_EQ(grid_manifest.size(), quant_test::grid_types().size()) << "update quant_test::grid_types()";
  for (const auto& e : grid_manifest) {
    const auto type = type_from_name(e.at("type").get<std::string>());
    ASSERT_TRUE(type.has_value()) << e.at("type");
    EXPECT_NE(std::find(quant_test::grid_types().begin(), quant_test::grid_types().end(), *type),
              quant_test::grid_types().end())
        << e.at("type");
  }
}

}  // namespace
}  // namespace revis
