#include "quant/k_stripes.h"

#include <cstring>

#include "quant/blocks.h"
#include "quant/kernels.h"

namespace revis::quant {
namespace {

// The stripes of kRows rows: move_row(block, r, out) puts row r's block
// into the stripe's block at out.
template <int kRows, typename Block, size_t kBlockBytes, typename MoveRow>
void repack_rows(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out, MoveRow move_row) {
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t first = 0; first < rows; first += kRows)
    for (int64_t b = 0; b < n / kSuperBlock; ++b, o += kBlockBytes) {
      if (first + kRows > rows) std::memset(o, 0, kBlockBytes);
      for (int r = 0; r < kRows && first + r < rows; ++r)
        move_row(reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + (first + r) * w_stride)[b], r, o);
    }
}

// Dwords i = 0 .. count - 1 of `from` into lane r of the vectors of kRows
// lanes at `to`.
template <int kRows>
void to_lane(const uint8_t* from, int count, int r, uint8_t* to) {
  for (int i = 0; i < count; ++i) std::memcpy(to + 4 * kRows * i + 4 * r, from + 4 * i, 4);
}

}  // namespace

template <int kRows, size_t kRowBytes, int kSums>
void StripeLayout<kRows, kRowBytes, kSums>::pack(const void* a, size_t a_stride, int64_t n, void* packed) {
  auto* out = static_cast<uint8_t*>(packed);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, out += kActivationBytes)
    for (int t = 0; t < 4; ++t) {
      const BlockQ8_K& block = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a) + t * a_stride)[b];
      std::memcpy(out + kSuperBlock * t, block.qs, kSuperBlock);
      // Q8_K's sums are of 16 values: kSums of 256 / kSums values each.
      constexpr int kPer = 16 / kSums;
      for (int g = 0; g < kSums; ++g) {
        int16_t sum = 0;
        for (int i = 0; i < kPer; ++i) sum = static_cast<int16_t>(sum + block.bsums[kPer * g + i]);
        std::memcpy(out + kSumsOffset + sizeof(int16_t) * (kSums * t + g), &sum, sizeof sum);
      }
      std::memcpy(out + kActivationScalesOffset + sizeof(float) * t, &block.d, sizeof(float));
    }
}

template <int kRows>
void Q4_KStripes<kRows>::repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out) {
  repack_rows<kRows, BlockQ4_K, Base::kBlockBytes>(w, w_stride, rows, n, out, [](const BlockQ4_K& x, int r, uint8_t* o) {
    to_lane<kRows>(x.qs, 32, r, o);
    int scale[8], min[8];
    unpack_scales_6bit(x.scales, scale, min);
    for (int g = 0; g < 8; ++g) {
      o[kScalesOffset + kRows * g + r] = static_cast<uint8_t>(scale[g]);
      o[kMinsOffset + 2 * kRows * (g / 2) + 2 * r + g % 2] = static_cast<uint8_t>(min[g]);
    }
    std::memcpy(o + kDOffset + sizeof(uint16_t) * r, &x.d, sizeof x.d);
    std::memcpy(o + kDminOffset + sizeof(uint16_t) * r, &x.dmin, sizeof x.dmin);
  });
}

template <int kRows>
void Q6_KStripes<kRows>::repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out) {
  repack_rows<kRows, BlockQ6_K, Base::kBlockBytes>(w, w_stride, rows, n, out, [](const BlockQ6_K& x, int r, uint8_t* o) {
    to_lane<kRows>(x.ql, 32, r, o);
    to_lane<kRows>(x.qh, 16, r, o + kHighOffset);
    for (int c = 0; c < 8; ++c) std::memcpy(o + kScalesOffset + 2 * kRows * c + 2 * r, x.scales + 2 * c, 2);
    std::memcpy(o + kDOffset + sizeof(uint16_t) * r, &x.d, sizeof x.d);
  });
}

template struct StripeLayout<8, 148, 8>;
template struct StripeLayout<16, 148, 8>;
template struct StripeLayout<16, 210, 16>;
template struct Q4_KStripes<8>;
template struct Q4_KStripes<16>;
template struct Q6_KStripes<16>;

}  // namespace revis::quant
