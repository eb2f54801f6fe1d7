#include "quant/packed_q8_0.h"

#include <algorithm>
#include <cstring>

#include "quant/blocks.h"
#include "quant/half.h"

namespace revis::quant {

size_t packed4_bytes_q8_0(int64_t n) { return static_cast<size_t>((n / kLegacyBlock + 1) / 2) * kPackedQ8_0PairBytes; }

void pack4_q8_0(const void* a, size_t a_stride, int64_t n, void* packed) {
  const int64_t blocks = n / kLegacyBlock;
  auto* out = static_cast<uint8_t*>(packed);
  for (int64_t b = 0; b < blocks; b += 2, out += kPackedQ8_0PairBytes) {
    float scales[2][4];
    for (int t = 0; t < 4; ++t) {
      const auto* row = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a) + t * a_stride);
      for (int h = 0; h < 2; ++h) {
        const bool present = b + h < blocks;
        uint8_t* values = out + 64 * t + 32 * h;
        if (present)
          std::memcpy(values, row[b + h].qs, kLegacyBlock);
        else
          std::memset(values, 0, kLegacyBlock);
        scales[h][t] = present ? half_to_float(row[b + h].d) : 0.0f;
      }
    }
    std::memcpy(out + kPackedQ8_0Values, scales, sizeof scales);
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
