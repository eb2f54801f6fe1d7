// The packed forms of Q8_0 activation rows (quant.h's PackedDot) that the
// x86 kernels of the Q8_0-activation types use. Each puts every value where a
// kernel loads it and converts the scales to floats once, so that a
// kernel's loop over the weight rows is loads and arithmetic, with no half
// to convert and no shuffle of the activations.
//
// Octets (the AVX2 kernels, four rows): value 4v..4v+3 of block j of
// eight sits in dword lane j of vector v, in the activations and in the
// weights (which MatMul rewrites a tile of rows at a time, see quant.h's
// PackedDot::repack_weights), so that vpmaddwd's eight lanes are eight
// blocks' partial sums: a kernel adds them up vertically and never folds
// lanes together. Activations, for each eight blocks: the four rows' eight
// 32-byte vectors, row after row, then the scales as floats, row after row
// (1152 bytes). Weights, for each eight blocks: the eight vectors, then
// the eight scales as halves (272 bytes, eight Q8_0 blocks' worth). The
// blocks after the last whole eight keep a plain layout: Q8_0 blocks in
// the weights, and per block the four rows' 32 values then their four
// scales as floats (144 bytes) in the activations. (With each block's
// four rows folded, as in the layout this replaced, the folding took
// about a third of the four-row Q8_0 kernel's operations.)
//
// SummedOctets (the AVX2 kernels of Q4_1 and Q5_1, four rows): Octets for
// weights x = d * q + m with unsigned levels q, whose offset m meets each
// activation block's sum. Activations add, after the scales, each block's
// scale times the sum of its values, as floats, row after row (1280 bytes
// per eight blocks; 160 per block after the last whole eight). Weights
// hold the unsigned levels, then the eight d, then the eight m, as halves
// (288 bytes); a block after the last whole eight is d, m and its 32
// levels (36 bytes).
//
// Quads (the AVX-512 VNNI kernels, one row or four): lane 4j + i of a
// 512-bit register belongs to block j of four and row Quads::row(i), so
// that vpdpbusd sums in each lane a share of one block of one row, and one
// float multiply-add per four blocks applies all sixteen scales. For each
// four blocks: 2 x rows 64-byte vectors, lane 4j + i of vector v holding
// dword d = Quads::dword(i, v) (values 4d..4d+3) of block j; then each
// lane's starting sum as an int16, minus the sum of its values (the
// kernels add 128 to the weights to make them vpdpbusd's unsigned side,
// and 128 x this, in the lane's integer sum, takes the 128 x values back
// out exactly); then the blocks' scales as floats, row after row within a
// block, which the kernels spread to the lanes. Missing blocks of the last
// four are zeros with scale zero. 608 bytes per 128 values with four rows,
// 176 with one. (With a full int32 sum and a scale per lane one row took
// 256: a long row's activations, 8192 values, then filled 16 KiB, and on a
// 32 KiB L1 the weights streaming through evicted them; the FFN's down
// projection ran 20-25% slower per byte than the other matrices.)
//
// Q8_0Stripes (the Q8_0 kernels for four tokens of AVX-512, sixteen rows, and
// of AVX2 with AVX-VNNI, eight rows): k_stripes.h's
// idea for the 32-value blocks of Q8_0: stripes of kRows weight rows, one
// row per dword lane, so that vpdpbusd with one token's dword broadcast
// takes four products of every row at once, and the scales are a vector
// over the rows. Weights, for each block of a stripe: eight vectors, lane
// r of vector s holding dword s of row r's values, each value plus 128
// (xor 0x80: vpdpbusd's unsigned side); then the rows' d as halves (34
// bytes per row, as Q8_0's). Activations, for each block: the four rows'
// 32 values, row after row; then per row -128 x the sum of its values as
// an int32, each row's sum's starting value, which takes the 128 x values
// the bias added back out exactly; then the four d as floats (160 bytes).
// A stripe whose rows run out is filled with zero rows (d = 0). For k a
// multiple of 32 a stripe's values k.. start at byte kRows x 34 x k / 32.
//
// Q4_0Stripes (Q4_0's kernels for four tokens where Q8_0 has stripes):
// Q8_0Stripes for Q4_0's weights, whose 4-bit levels q (value d x (q - 8))
// are already vpdpbusd's unsigned side and stay as stored. For each block
// of a stripe: four vectors, lane r of vector s holding dword s of row r's
// qs (its low nibbles are values 4s..4s+3, its high nibbles values
// 16+4s..16+4s+3); then the rows' d as halves (18 bytes per row, as
// Q4_0's). The activations are Q8_0Stripes': their starting sum -128 x the
// values' sum, shifted right by four, is -8 x that sum, which takes the
// levels' offset of 8 back out exactly. Filled-up rows hold level 8 with
// d = 0.
//
// Mxfp4Stripes (MXFP4's kernels for four tokens where Q4_0 has stripes):
// Q4_0Stripes' nibbles for MXFP4's 4-bit codes, which the kernels look up
// in kMxfp4Values plus 16, vpdpbusd's unsigned side; the activations are
// Q8_0Stripes', whose starting sum shifted right by three, -16 x the sum,
// takes that 16 back out exactly. After the nibbles, the rows' E8M0 scale
// bytes (17 bytes per row, as MXFP4's). Filled-up rows hold code 0 (value
// 0) with scale byte 0.
//
// Internal to src/quant.
#pragma once

#include <cstddef>
#include <cstdint>

namespace revis::quant {

// Octets: see above.
struct Octets {
  static constexpr int kBlocks = 8;
  static constexpr size_t kActivationBytes = 4 * 8 * 32 + 4 * 8 * sizeof(float);
  static constexpr size_t kWeightBytes = 8 * 32 + 8 * sizeof(uint16_t);
  static constexpr size_t kTailActivationBytes = 4 * 32 + 4 * sizeof(float);  // per block

  static size_t bytes(int64_t n);
  static void pack(const void* a, size_t a_stride, int64_t n, void* packed);
};

// SummedOctets: see above.
struct SummedOctets {
  static constexpr int kBlocks = Octets::kBlocks;
  static constexpr size_t kSumsOffset = Octets::kActivationBytes;
  static constexpr size_t kActivationBytes = kSumsOffset + 4 * 8 * sizeof(float);
  static constexpr size_t kWeightBytes = Octets::kWeightBytes + 8 * sizeof(uint16_t);
  static constexpr size_t kTailSumsOffset = Octets::kTailActivationBytes;
  static constexpr size_t kTailActivationBytes = kTailSumsOffset + 4 * sizeof(float);
  static constexpr size_t kTailWeightBytes = 2 * sizeof(uint16_t) + 32;

  static size_t bytes(int64_t n);
  static void pack(const void* a, size_t a_stride, int64_t n, void* packed);
};

// Quads of kRows rows (1 or 4): the vectors of values, then the starting
// sums, then the scales, for every four blocks.
template <int kRows>
struct Quads {
  static_assert(kRows == 1 || kRows == 4);
  static constexpr int kVectors = 2 * kRows;
  static constexpr int kScales = 4 * kRows;  // per four blocks
  static constexpr size_t kSumsOffset = kVectors * 64;
  static constexpr size_t kScalesOffset = kSumsOffset + 16 * sizeof(int16_t);
  static constexpr size_t kBytes = kScalesOffset + kScales * sizeof(float);
  // The row and the dword of its block that lane 4j + i of vector v holds.
  static constexpr int row(int i) { return i % kRows; }
  static constexpr int dword(int i, int v) { return i / kRows + 4 / kRows * v; }

  static size_t bytes(int64_t n);
  static void pack(const void* a, size_t a_stride, int64_t n, void* packed);
};

// Q8_0Stripes: see above.
template <int kRows>
struct Q8_0Stripes {
  static constexpr size_t kRowBytes = 34;  // per block
  static constexpr size_t kDOffset = 32 * kRows;
  static constexpr size_t kBlockBytes = kRows * kRowBytes;
  static constexpr size_t kSumsOffset = 4 * 32;
  static constexpr size_t kScalesOffset = kSumsOffset + 4 * sizeof(int32_t);
  static constexpr size_t kActivationBytes = kScalesOffset + 4 * sizeof(float);

  static size_t bytes(int64_t n) { return static_cast<size_t>(n / 32) * kActivationBytes; }
  static void pack(const void* a, size_t a_stride, int64_t n, void* packed);
  static size_t weight_bytes(int64_t n) { return static_cast<size_t>(n / 32) * kRowBytes; }
  static void repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out);
};

// Q4_0Stripes: see above. Activations: Q8_0Stripes<kRows>'s bytes and pack.
template <int kRows>
struct Q4_0Stripes {
  static constexpr size_t kRowBytes = 18;  // per block
  static constexpr size_t kDOffset = 16 * kRows;
  static constexpr size_t kBlockBytes = kRows * kRowBytes;
  static constexpr int kStartShift = 4;  // -128 x sum >> 4 = -8 x sum

  static size_t weight_bytes(int64_t n) { return static_cast<size_t>(n / 32) * kRowBytes; }
  static void repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out);
};

// Mxfp4Stripes: see above. Activations: Q8_0Stripes<kRows>'s bytes and pack.
template <int kRows>
struct Mxfp4Stripes {
  static constexpr size_t kRowBytes = 17;  // per block
  static constexpr size_t kScaleOffset = 16 * kRows;
  static constexpr size_t kBlockBytes = kRows * kRowBytes;
  static constexpr int kStartShift = 3;  // -128 x sum >> 3 = -16 x sum
  static constexpr int kLevelOffset = 16;

  static size_t weight_bytes(int64_t n) { return static_cast<size_t>(n / 32) * kRowBytes; }
  static void repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out);
};

}  // namespace revis::quant
