#include "quant/q4_k_stripes.h"

#include <cstring>

#include "quant/blocks.h"
#include "quant/kernels.h"

namespace revis::quant {

size_t Q4_KStripes::bytes(int64_t n) { return static_cast<size_t>(n / kSuperBlock) * kActivationBytes; }

void Q4_KStripes::pack(const void* a, size_t a_stride, int64_t n, void* packed) {
  auto* out = static_cast<uint8_t*>(packed);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, out += kActivationBytes)
    for (int t = 0; t < 4; ++t) {
      const BlockQ8_K& block = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a) + t * a_stride)[b];
      std::memcpy(out + kSuperBlock * t, block.qs, kSuperBlock);
      for (int g = 0; g < 8; ++g) {
        const auto sum = static_cast<int16_t>(block.bsums[2 * g] + block.bsums[2 * g + 1]);
        std::memcpy(out + kSumsOffset + sizeof(int16_t) * (8 * t + g), &sum, sizeof sum);
      }
      std::memcpy(out + kActivationScalesOffset + sizeof(float) * t, &block.d, sizeof(float));
    }
}

size_t Q4_KStripes::weight_bytes(int64_t n) { return static_cast<size_t>(n / kSuperBlock) * (kBlockBytes / kRows); }

void Q4_KStripes::repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out) {
  auto* o = static_cast<uint8_t*>(out);
  const int64_t blocks = n / kSuperBlock;
  for (int64_t first = 0; first < rows; first += kRows)
    for (int64_t b = 0; b < blocks; ++b, o += kBlockBytes) {
      if (first + kRows > rows) std::memset(o, 0, kBlockBytes);
      for (int r = 0; r < kRows && first + r < rows; ++r) {
        const BlockQ4_K& x = reinterpret_cast<const BlockQ4_K*>(static_cast<const uint8_t*>(w) + (first + r) * w_stride)[b];
        for (int p = 0; p < 4; ++p)
          for (int s = 0; s < 8; ++s) std::memcpy(o + 64 * (8 * p + s) + 4 * r, x.qs + 32 * p + 4 * s, 4);
        int scale[8], min[8];
        unpack_scales_6bit(x.scales, scale, min);
        for (int g = 0; g < 8; ++g) {
          o[kScalesOffset + kRows * g + r] = static_cast<uint8_t>(scale[g]);
          o[kMinsOffset + 2 * kRows * (g / 2) + 2 * r + g % 2] = static_cast<uint8_t>(min[g]);
        }
        std::memcpy(o + kDOffset + sizeof(uint16_t) * r, &x.d, sizeof x.d);
        std::memcpy(o + kDminOffset + sizeof(uint16_t) * r, &x.dmin, sizeof x.dmin);
      }
    }
}

}  // namespace revis::quant
