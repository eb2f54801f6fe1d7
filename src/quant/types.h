// Tensor element types as numbered by GGUF (the ggml type ids), and the
// block geometry of each: how many values a block holds and how many bytes
// it takes. Everything that sizes or walks tensor data goes through here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace revis {

enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I32 = 26,  // integer tables (deepseek4's hash routing), never a weight
  IQ1_M = 29,
  BF16 = 30,
  MXFP4 = 39,  // gpt-oss's experts
};

struct TypeTraits {
  const char* name;     // "Q4_K"
  int64_t block_size;   // values per block (1 for plain floats)
  size_t block_bytes;   // bytes per block
};

// Traits of a ggml type id, or nullptr when revis does not know the id.
const TypeTraits* type_traits(uint32_t ggml_type_id);
const TypeTraits& type_traits(TensorType type);
const char* type_name(TensorType type);
// Case-insensitive lookup by name ("q8_0", "F16").
std::optional<TensorType> type_from_name(std::string_view name);

// Bytes taken by a row of n values; n must be a multiple of the block size.
size_t row_bytes(TensorType type, int64_t n);

}  // namespace revis
