// The type table: block structs against types.cpp's geometry, which types
// are supported, and which activation format each weight type pairs with.
#include <gtest/gtest.h>

#include <vector>

#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/test_util.h"

namespace revis {
namespace {

TEST(Blocks, StructSizesMatchTypeTable) {
  EXPECT_EQ(sizeof(quant::BlockQ4_0), type_traits(TensorType::Q4_0).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockQ4_1), type_traits(TensorType::Q4_1).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockQ5_0), type_traits(TensorType::Q5_0).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockQ5_1), type_traits(TensorType::Q5_1).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockQ8_0), type_traits(TensorType::Q8_0).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockQ2_K), type_traits(TensorType::Q2_K).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockQ3_K), type_traits(TensorType::Q3_K).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockQ4_K), type_traits(TensorType::Q4_K).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockQ5_K), type_traits(TensorType::Q5_K).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockQ6_K), type_traits(TensorType::Q6_K).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockQ8_K), type_traits(TensorType::Q8_K).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockIQ4_NL), type_traits(TensorType::IQ4_NL).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockIQ4_XS), type_traits(TensorType::IQ4_XS).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockIQ2_XXS), type_traits(TensorType::IQ2_XXS).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockIQ2_XS), type_traits(TensorType::IQ2_XS).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockIQ2_S), type_traits(TensorType::IQ2_S).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockIQ3_XXS), type_traits(TensorType::IQ3_XXS).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockIQ3_S), type_traits(TensorType::IQ3_S).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockIQ1_S), type_traits(TensorType::IQ1_S).block_bytes);
  EXPECT_EQ(sizeof(quant::BlockIQ1_M), type_traits(TensorType::IQ1_M).block_bytes);
  EXPECT_EQ(type_traits(TensorType::Q4_0).block_size, quant::kLegacyBlock);
  EXPECT_EQ(type_traits(TensorType::Q4_K).block_size, quant::kSuperBlock);
}

TEST(Dispatch, SupportsEveryTypeButQ8_1) {
  for (TensorType type : quant_test::quantizable_types()) {
    EXPECT_TRUE(can_dequantize(type)) << type_name(type);
    EXPECT_TRUE(can_quantize(type)) << type_name(type);
  }
  EXPECT_FALSE(can_dequantize(TensorType::Q8_1));
  EXPECT_FALSE(can_quantize(TensorType::Q8_1));
}

TEST(Dispatch, ActivationTypes) {
  for (TensorType w : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0,
                       TensorType::IQ4_NL})
    EXPECT_EQ(activation_type(w), TensorType::Q8_0) << type_name(w);
  for (TensorType w : {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
                       TensorType::IQ4_XS, TensorType::Q8_K})
    EXPECT_EQ(activation_type(w), TensorType::Q8_K) << type_name(w);
  for (TensorType w : {TensorType::F32, TensorType::F16, TensorType::BF16}) EXPECT_EQ(activation_type(w), w);
  // Every activation format can itself be produced and read back.
  for (TensorType w : quant_test::quantizable_types()) {
    EXPECT_TRUE(can_quantize(activation_type(w))) << type_name(w);
    EXPECT_EQ(type_traits(activation_type(w)).block_size % type_traits(w).block_size, 0) << type_name(w);
  }
}

TEST(DispatchDeathTest, RejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> out(1024);
  EXPECT_DEATH(quantize_row(TensorType::Q4_0, x.data(), out.data(), 31), "whole number of blocks");
  EXPECT_DEATH(dequantize_row(TensorType::Q8_1, out.data(), x.data(), 32), "not supported");
}

}  // namespace
}  // namespace revis
