#include "quant/f16_stripes.h"

#include <cstring>

#include "quant/half.h"

namespace revis::quant {

template <int kRows>
void F16Stripes<kRows>::pack(const void* a, size_t a_stride, int64_t n, void* packed) {
  auto* out = static_cast<float*>(packed);
  for (int t = 0; t < 4; ++t) {
    const auto* row = static_cast<const uint8_t*>(a) + t * a_stride;
    for (int64_t c = 0; c < n; ++c) {
      uint16_t h;
      std::memcpy(&h, row + sizeof h * c, sizeof h);
      out[4 * c + t] = half_to_float(h);
    }
  }
}

template <int kRows>
void F16Stripes<kRows>::repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out) {
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t first = 0; first < rows; first += kRows, o += static_cast<size_t>(n) * kColumnBytes) {
    const int here = static_cast<int>(rows - first < kRows ? rows - first : kRows);
    if (here < kRows) std::memset(o, 0, static_cast<size_t>(n) * kColumnBytes);
    for (int r = 0; r < here; ++r) {
      const auto* row = static_cast<const uint8_t*>(w) + (first + r) * w_stride;
      for (int64_t c = 0; c < n; ++c) std::memcpy(o + c * kColumnBytes + sizeof(uint16_t) * r, row + sizeof(uint16_t) * c, sizeof(uint16_t));
    }
  }
}

template struct F16Stripes<8>;
template struct F16Stripes<16>;

}  // namespace revis::quant
