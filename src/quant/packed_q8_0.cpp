#include "quant/packed_q8_0.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "quant/blocks.h"
#include "quant/half.h"

namespace revis::quant {

namespace {

// Octets, and with kSums the scaled block sums of SummedOctets after them.
template <bool kSums>
size_t octet_bytes(int64_t n) {
  using Layout = std::conditional_t<kSums, SummedOctets, Octets>;
  const int64_t blocks = n / kLegacyBlock;
  return static_cast<size_t>(blocks / Octets::kBlocks) * Layout::kActivationBytes +
         static_cast<size_t>(blocks % Octets::kBlocks) * Layout::kTailActivationBytes;
}

template <bool kSums>
void pack_octets(const void* a, size_t a_stride, int64_t n, void* packed) {
  using Layout = std::conditional_t<kSums, SummedOctets, Octets>;
  constexpr int kBlocks = Octets::kBlocks;
  const int64_t blocks = n / kLegacyBlock, whole = blocks / kBlocks * kBlocks;
  auto* out = static_cast<uint8_t*>(packed);
  auto row = [&](int t) { return reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a) + t * a_stride); };
  auto put_float = [](uint8_t* at, float value) { std::memcpy(at, &value, sizeof value); };
  auto scaled_sum = [](const BlockQ8_0& block) {
    int sum = 0;
    for (int8_t q : block.qs) sum += q;
    return half_to_float(block.d) * static_cast<float>(sum);
  };
  for (int64_t first = 0; first < whole; first += kBlocks, out += Layout::kActivationBytes) {
    uint8_t* scales = out + 4 * kBlocks * 32;
    for (int t = 0; t < 4; ++t)
      for (int j = 0; j < kBlocks; ++j) {
        const BlockQ8_0& block = row(t)[first + j];
        for (int v = 0; v < 8; ++v) std::memcpy(out + 256 * t + 32 * v + 4 * j, block.qs + 4 * v, 4);
        put_float(scales + sizeof(float) * (kBlocks * t + j), half_to_float(block.d));
        if constexpr (kSums) put_float(out + SummedOctets::kSumsOffset + sizeof(float) * (kBlocks * t + j), scaled_sum(block));
      }
  }
  for (int64_t b = whole; b < blocks; ++b, out += Layout::kTailActivationBytes)
    for (int t = 0; t < 4; ++t) {
      const BlockQ8_0& block = row(t)[b];
      std::memcpy(out + 32 * t, block.qs, kLegacyBlock);
      put_float(out + 4 * 32 + sizeof(float) * t, half_to_float(block.d));
      if constexpr (kSums) put_float(out + SummedOctets::kTailSumsOffset + sizeof(float) * t, scaled_sum(block));
    }
}

}  // namespace

size_t Octets::bytes(int64_t n) { return octet_bytes<false>(n); }
void Octets::pack(const void* a, size_t a_stride, int64_t n, void* packed) { pack_octets<false>(a, a_stride, n, packed); }
size_t SummedOctets::bytes(int64_t n) { return octet_bytes<true>(n); }
void SummedOctets::pack(const void* a, size_t a_stride, int64_t n, void* packed) {
  pack_octets<true>(a, a_stride, n, packed);
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

template <int kRows>
void Q8_0Stripes<kRows>::pack(const void* a, size_t a_stride, int64_t n, void* packed) {
  auto* out = static_cast<uint8_t*>(packed);
  for (int64_t b = 0; b < n / kLegacyBlock; ++b, out += kActivationBytes)
    for (int t = 0; t < 4; ++t) {
      const BlockQ8_0& block = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a) + t * a_stride)[b];
      std::memcpy(out + 32 * t, block.qs, kLegacyBlock);
      int32_t sum = 0;
      for (int8_t q : block.qs) sum += q;
      const int32_t start = -128 * sum;
      std::memcpy(out + kSumsOffset + sizeof(int32_t) * t, &start, sizeof start);
      const float d = half_to_float(block.d);
      std::memcpy(out + kScalesOffset + sizeof(float) * t, &d, sizeof d);
    }
}

namespace {

// A block's scale as a stripe stores it: Q8_0's and Q4_0's half, MXFP4's
// exponent byte.
inline const uint16_t& stored_scale(const BlockQ8_0& b) { return b.d; }
inline const uint16_t& stored_scale(const BlockQ4_0& b) { return b.d; }
inline const uint8_t& stored_scale(const BlockMXFP4& b) { return b.e; }

// Stripes of kRows rows of 32-value blocks, kBlockBytes per block of a
// stripe: a stripe whose rows run out first gets `filled` up to the scales
// at kDOffset and zero scales; move_row(block, r, out) then puts row r's
// block into the stripe's block at out, and its scale goes to row r's
// place after kDOffset.
template <int kRows, typename Block, size_t kBlockBytes, size_t kDOffset, typename MoveRow>
void repack_blocks(const void* w, size_t w_stride, int64_t rows, int64_t n, uint8_t filled, void* out,
                   MoveRow move_row) {
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t first = 0; first < rows; first += kRows)
    for (int64_t b = 0; b < n / kLegacyBlock; ++b, o += kBlockBytes) {
      if (first + kRows > rows) {
        std::memset(o, filled, kDOffset);
        std::memset(o + kDOffset, 0, kBlockBytes - kDOffset);
      }
      for (int r = 0; r < kRows && first + r < rows; ++r) {
        const Block& block = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + (first + r) * w_stride)[b];
        move_row(block, r, o);
        const auto& scale = stored_scale(block);
        std::memcpy(o + kDOffset + sizeof scale * r, &scale, sizeof scale);
      }
    }
}

}  // namespace

template <int kRows>
void Q8_0Stripes<kRows>::repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out) {
  // Filled-up rows: levels 0 (128 biased).
  repack_blocks<kRows, BlockQ8_0, kBlockBytes, kDOffset>(w, w_stride, rows, n, 0x80, out,
                                                         [](const BlockQ8_0& block, int r, uint8_t* o) {
                                                           for (int s = 0; s < 8; ++s)
                                                             for (int i = 0; i < 4; ++i)
                                                               o[4 * kRows * s + 4 * r + i] =
                                                                   static_cast<uint8_t>(block.qs[4 * s + i] ^ 0x80);
                                                         });
}

template struct Q8_0Stripes<8>;
template struct Q8_0Stripes<16>;

namespace {

// Q4_0's and MXFP4's nibbles, as stored: dword s of row r's qs goes to
// lane r of vector s.
template <int kRows, typename Block, size_t kBlockBytes, size_t kScalesOffset>
void repack_nibbles(const void* w, size_t w_stride, int64_t rows, int64_t n, uint8_t filled, void* out) {
  repack_blocks<kRows, Block, kBlockBytes, kScalesOffset>(w, w_stride, rows, n, filled, out,
                                                          [](const Block& block, int r, uint8_t* o) {
                                                            for (int s = 0; s < 4; ++s)
                                                              std::memcpy(o + 4 * kRows * s + 4 * r, block.qs + 4 * s, 4);
                                                          });
}

}  // namespace

template <int kRows>
void Q4_0Stripes<kRows>::repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out) {
  // Filled-up rows: levels 8 (value 0).
  repack_nibbles<kRows, BlockQ4_0, kBlockBytes, kDOffset>(w, w_stride, rows, n, 0x88, out);
}

template struct Q4_0Stripes<8>;
template struct Q4_0Stripes<16>;

template <int kRows>
void Mxfp4Stripes<kRows>::repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out) {
  // Filled-up rows: code 0 (value 0).
  repack_nibbles<kRows, BlockMXFP4, kBlockBytes, kScaleOffset>(w, w_stride, rows, n, 0x00, out);
}

template struct Mxfp4Stripes<8>;
template struct Mxfp4Stripes<16>;

}  // namespace revis::quant
