// The packed forms of Q8_0 activation rows (quant.h's PackedDot) that the
// x86 kernels of the Q8_0-activation types use. Both put each value where a
// kernel loads it and convert the scales to floats once, so that a
// kernel's loop over the weight rows is loads and arithmetic, with no half
// to convert and no shuffle of the activations.
//
// Pairs (the AVX2 kernels, four rows): for each pair of blocks, the four
// rows' 64 values (the two blocks' 32 each, row after row), then the scales
// as floats, the four rows' of the first block and then of the second. A
// missing second block of an odd count is zeros with scale zero. 288 bytes
// per 64 values. (With each row's scale repeated over a register's eight
// lanes it took 512, and a 2048-value row of four tokens no longer fit
// beside the weights in a 32 KiB L1.)
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
// Internal to src/quant.
#pragma once

#include <cstddef>
#include <cstdint>

namespace revis::quant {

constexpr size_t kPackedQ8_0Values = 4 * 64;                                       // per pair of blocks
constexpr size_t kPackedQ8_0PairBytes = kPackedQ8_0Values + 2 * 4 * sizeof(float);  // values, then scales

size_t packed4_bytes_q8_0(int64_t n);
void pack4_q8_0(const void* a, size_t a_stride, int64_t n, void* packed);

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

}  // namespace revis::quant
