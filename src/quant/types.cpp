#include "quant/types.h"

#include <cctype>

namespace revis {
namespace {

struct Entry {
  TensorType type;
  TypeTraits traits;
};

// Block geometry follows GGUF's on-disk layouts (see docs/formats.md).
constexpr Entry kTypes[] = {
    {TensorType::F32, {"F32", 1, 4}},
    {TensorType::F16, {"F16", 1, 2}},
    {TensorType::BF16, {"BF16", 1, 2}},
    {TensorType::Q4_0, {"Q4_0", 32, 2 + 16}},
    {TensorType::Q4_1, {"Q4_1", 32, 2 + 2 + 16}},
    {TensorType::Q5_0, {"Q5_0", 32, 2 + 4 + 16}},
    {TensorType::Q5_1, {"Q5_1", 32, 2 + 2 + 4 + 16}},
    {TensorType::Q8_0, {"Q8_0", 32, 2 + 32}},
    {TensorType::Q8_1, {"Q8_1", 32, 2 + 2 + 32}},
    {TensorType::Q2_K, {"Q2_K", 256, 16 + 64 + 2 + 2}},
    {TensorType::Q3_K, {"Q3_K", 256, 32 + 64 + 12 + 2}},
    {TensorType::Q4_K, {"Q4_K", 256, 2 + 2 + 12 + 128}},
    {TensorType::Q5_K, {"Q5_K", 256, 2 + 2 + 12 + 32 + 128}},
    {TensorType::Q6_K, {"Q6_K", 256, 128 + 64 + 16 + 2}},
    {TensorType::Q8_K, {"Q8_K", 256, 4 + 256 + 32}},
    {TensorType::IQ4_NL, {"IQ4_NL", 32, 2 + 16}},
    {TensorType::MXFP4, {"MXFP4", 32, 1 + 16}},
    {TensorType::IQ4_XS, {"IQ4_XS", 256, 2 + 2 + 4 + 128}},
    {TensorType::IQ2_XXS, {"IQ2_XXS", 256, 2 + 64}},
    {TensorType::IQ2_XS, {"IQ2_XS", 256, 2 + 64 + 8}},
    {TensorType::IQ2_S, {"IQ2_S", 256, 2 + 64 + 8 + 8}},
    {TensorType::IQ3_XXS, {"IQ3_XXS", 256, 2 + 64 + 32}},
    {TensorType::IQ3_S, {"IQ3_S", 256, 2 + 64 + 8 + 32 + 4}},
    {TensorType::IQ1_S, {"IQ1_S", 256, 2 + 32 + 16}},
    {TensorType::IQ1_M, {"IQ1_M", 256, 32 + 16 + 8}},
    {TensorType::I32, {"I32", 1, 4}},
};

}  // namespace

const TypeTraits* type_traits(uint32_t ggml_type_id) {
  for (const Entry& e : kTypes)
    if (static_cast<uint32_t>(e.type) == ggml_type_id) return &e.traits;
  return nullptr;
}

const TypeTraits& type_traits(TensorType type) { return *type_traits(static_cast<uint32_t>(type)); }

const char* type_name(TensorType type) { return type_traits(type).name; }

std::optional<TensorType> type_from_name(std::string_view name) {
  for (const Entry& e : kTypes) {
    std::string_view candidate = e.traits.name;
    if (candidate.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i)
      same = std::toupper(static_cast<unsigned char>(name[i])) == candidate[i];
    if (same) return e.type;
  }
  return std::nullopt;
}

size_t row_bytes(TensorType type, int64_t n) {
  const TypeTraits& t = type_traits(type);
  return static_cast<size_t>(n / t.block_size) * t.block_bytes;
}

}  // namespace revis
