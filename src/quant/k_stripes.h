// Q4_K and Q6_K in stripes of rows: the packed forms of dot4 (quant.h's
// PackedDot) for the two types of Q4_K_M files, weights and activations
// both in a layout of their own. AVX-512 takes both in stripes of sixteen
// rows, AVX2 Q4_K in stripes of eight.
//
// Why: one weight row against four tokens must sum each token's products
// across a register's lanes, spread each group's scale to the lanes it
// covers and apply the block's floats per token, and all of that is more
// instructions than the multiplications themselves. With a stripe of rows
// in a register's dword lanes (sixteen on AVX-512, eight on AVX2), a lane
// is one row: vpdpbusd (or vpmaddubsw) multiplies four of that row's
// levels with four of a token's values, which one broadcast load brings to
// every lane, and the scales, the minimums and the floats are vectors over
// the rows, applied once per group or block for the whole stripe. Nothing
// is ever summed across lanes.
//
// Each layout below is per super-block of a stripe of R rows, the sizes
// given for R = 16. A vector is 4R bytes; "lane r holds dword x" means
// bytes 4r .. 4r + 3 of a vector are bytes x .. x + 3 of row r's block:
// the rows' level bytes are moved, never unpacked, so a repack is a
// transposition of dwords. Per-row bytes are laid out likewise, with R
// (or 2R) where 16 (32) stands below. A stripe whose rows run out is
// filled with zero rows (d = 0), whose products are zero. For k a multiple
// of 256 a stripe's values k.. start at byte R x weight_bytes(k).
//
// Q4_K (kBlockBytes = R x 148):
//   qs      for pair p = 0..3 and step s = 0..7, a vector whose lane r holds
//           dword 32p + 4s of row r's qs: low nibbles values 4s .. 4s + 3
//           of group 2p, high nibbles those of group 2p + 1 (2048 bytes);
//   scales  the 6-bit scales as bytes, group-major: scales[16g + r] (128);
//   mins    the 6-bit minimums as bytes, for each pair p and row r those
//           of groups 2p and 2p + 1 side by side: mins[32p + 2r + i] (128);
//   d, dmin the rows' two block scales as halves, d[r] then dmin[r] (64).
// Activations, four Q8_K rows: the four rows' 256 values, row after row;
// then each row's sums of its eight groups of 32 values as int16; then the
// four rows' d as floats.
//
// Q6_K (kBlockBytes = R x 210):
//   ql      for half h = 0..1, part j = 0..1 and step s = 0..7, a vector
//           whose lane r holds dword 64h + 32j + 4s of row r's ql: low
//           nibbles values 4s .. 4s + 3 of chunk 4h + j (32 values), high
//           nibbles those of chunk 4h + j + 2 (2048 bytes);
//   qh      for half h and step s, lane r holding dword 32h + 4s of row r's
//           qh: chunk 4h + k's top two bits at bit 2k (1024);
//   scales  the int8 scales of groups of 16, for each chunk c and row r
//           those of groups 2c and 2c + 1 side by side: scales[32c + 2r + i]
//           (256);
//   d       the rows' block scales as halves (32).
// Activations, four Q8_K rows: the four rows' 256 values; then their
// sixteen group sums (Q8_K's bsums) as they are; then their d as floats.
//
// Internal to src/quant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace revis::quant {

// What both layouts share, for stripes of kRows rows (a 512-bit
// register's sixteen dword lanes on AVX-512, a 256-bit one's eight on
// AVX2) of kRowBytes bytes per row and super-block: the activations, with
// kSums group sums per row, and the sizes PackedDot asks for.
template <int kRows, size_t kRowBytes, int kSums>
struct StripeLayout {
  static constexpr size_t kVectorBytes = 4 * kRows;
  static constexpr size_t kBlockBytes = kRows * kRowBytes;

  static constexpr size_t kSumsOffset = 4 * kSuperBlock;
  static constexpr size_t kActivationScalesOffset = kSumsOffset + 4 * kSums * sizeof(int16_t);
  static constexpr size_t kActivationBytes = kActivationScalesOffset + 4 * sizeof(float);

  // PackedDot's functions but repack_weights.
  static size_t bytes(int64_t n) { return static_cast<size_t>(n / kSuperBlock) * kActivationBytes; }
  static void pack(const void* a, size_t a_stride, int64_t n, void* packed);
  static size_t weight_bytes(int64_t n) { return static_cast<size_t>(n / kSuperBlock) * kRowBytes; }
};

template <int kRows>
struct Q4_KStripes : StripeLayout<kRows, 148, 8> {
  using Base = StripeLayout<kRows, 148, 8>;
  static constexpr size_t kScalesOffset = 32 * Base::kVectorBytes;
  static constexpr size_t kMinsOffset = kScalesOffset + 8 * kRows;
  static constexpr size_t kDOffset = kMinsOffset + 8 * kRows;
  static constexpr size_t kDminOffset = kDOffset + 2 * kRows;
  static_assert(kDminOffset + 2 * kRows == Base::kBlockBytes);

  static void repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out);
};

template <int kRows>
struct Q6_KStripes : StripeLayout<kRows, 210, 16> {
  using Base = StripeLayout<kRows, 210, 16>;
  static constexpr size_t kHighOffset = 32 * Base::kVectorBytes;
  static constexpr size_t kScalesOffset = kHighOffset + 16 * Base::kVectorBytes;
  static constexpr size_t kDOffset = kScalesOffset + 16 * kRows;
  static_assert(kDOffset + 2 * kRows == Base::kBlockBytes);

  static void repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out);
};

}  // namespace revis::quant
