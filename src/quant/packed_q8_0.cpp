#include "quant/packed_q8_0.h"

#include <algorithm>
#include <cstring>

#include "quant/blocks.h"
#include "quant/half.h"

namespace revis::quant {

size_t Octets::bytes(int64_t n) {
  const int64_t blocks = n / kLegacyBlock;
  return static_cast<size_t>(blocks / kBlocks) * kActivationBytes +
         static_cast<size_t>(blocks % kBlocks) * kTailActivationBytes;
}

void Octets::pack(const void* a, size_t a_stride, int64_t n, void* packed) {
  const int64_t blocks = n / kLegacyBlock, whole = blocks / kBlocks * kBlocks;
  auto* out = static_cast<uint8_t*>(packed);
  auto row = [&](int t) { return reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a) + t * a_stride); };
  for (int64_t first = 0; first < whole; first += kBlocks, out += kActivationBytes) {
    auto* scales = reinterpret_cast<float*>(out + 4 * kBlocks * 32);
    for (int t = 0; t < 4; ++t)
      for (int j = 0; j < kBlocks; ++j) {
        const BlockQ8_0& block = row(t)[first + j];
        for (int v = 0; v < 8; ++v) std::memcpy(out + 256 * t + 32 * v + 4 * j, block.qs + 4 * v, 4);
        const float scale = half_to_float(block.d);
        std::memcpy(&scales[kBlocks * t + j], &scale, sizeof scale);
      }
  }
  for (int64_t b = whole; b < blocks; ++b, out += kTailActivationBytes)
    for (int t = 0; t < 4; ++t) {
      const BlockQ8_0& block = row(t)[b];
      std::memcpy(out + 32 * t, block.qs, kLegacyBlock);
      const float scale = half_to_float(block.d);
      std::memcpy(out + 4 * 32 + sizeof(float) * t, &scale, sizeof scale);
    }
}

template <int kRows>
size_t Quads<kRows>::bytes(int64_t n) {
  return static_cast<size_t>((n / kLegacyBlock + 3) / 4) * kBytes;
}

template <int kRows>
void Quads<kRows>::pack(const void* a, size_t a_stride, int64_t n, void* packed) {
  const int64_t blocks = n / kLegacyBlock;
  auto* out = static_cast<uint8_t*>(packed);
  for (int64_t first = 0; first < blocks; first += 4, out += kBytes) {
    int16_t sums[16] = {};
    float scales[kScales] = {};
    std::memset(out, 0, kSumsOffset);
    for (int64_t b = first; b < std::min(first + 4, blocks); ++b)
      for (int i = 0; i < 4; ++i) {
        const auto& block = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a) + row(i) * a_stride)[b];
        const size_t lane = 4 * (b - first) + i;
        for (int v = 0; v < kVectors; ++v) {
          const int8_t* values = block.qs + 4 * dword(i, v);
          std::memcpy(out + 64 * v + 4 * lane, values, 4);
          for (int k = 0; k < 4; ++k) sums[lane] = static_cast<int16_t>(sums[lane] - values[k]);
        }
        scales[kRows * (b - first) + row(i)] = half_to_float(block.d);
      }
    std::memcpy(out + kSumsOffset, sums, sizeof sums);
    std::memcpy(out + kScalesOffset, scales, sizeof scales);
  }
}

template struct Quads<1>;
template struct Quads<4>;

}  // namespace revis::quant
