// The packed forms of four Q8_0 activation rows (quant.h's PackedDot4) that
// the x86 kernels of the Q8_0-activation types use. Both put each value
// where a kernel loads it and convert the scales to floats once, so that a
// kernel's loop over the weight rows is loads and arithmetic, with no half
// to convert and no shuffle of the activations.
//
// Pairs (the AVX2 kernels): for each pair of blocks, the four rows' 64
// values (the two blocks' 32 each, row after row), then the four rows'
// scales as 16 floats each (the first block's eight times, then the
// second's). A missing second block of an odd count is zeros with scale
// zero. 512 bytes per 64 values.
//
// Quads (the AVX-512 VNNI kernels): one 512-bit register has a lane for
// each block j of four and row t, lane 4j + t, so that vpdpbusd sums a
// whole block per lane and one float multiply-add per four blocks applies
// all sixteen scales. For each four blocks: eight 64-byte vectors, vector k
// holding values 4k..4k+3 of (block j, row t) in lane 4j + t; then each
// lane's starting sum, -128 x the sum of its block's values (the kernels
// add 128 to the weights to make them vpdpbusd's unsigned side, and this
// takes the 128 x values back out); then the lanes' scales as floats.
// Missing blocks of the last four are zeros with scale zero. 640 bytes per
// 128 values.
//
// Internal to src/quant.
#pragma once

#include <cstddef>
#include <cstdint>

namespace revis::quant {

constexpr size_t kPackedQ8_0Values = 4 * 64;                                        // per pair of blocks
constexpr size_t kPackedQ8_0PairBytes = kPackedQ8_0Values + 4 * 16 * sizeof(float);  // values, then scales

size_t packed4_bytes_q8_0(int64_t n);
void pack4_q8_0(const void* a, size_t a_stride, int64_t n, void* packed);

constexpr size_t kQuadValuesBytes = 8 * 64;                                             // per four blocks
constexpr size_t kQuadBytes = kQuadValuesBytes + 16 * sizeof(int32_t) + 16 * sizeof(float);  // values, sums, scales

size_t quads4_bytes_q8_0(int64_t n);
void quads4_q8_0(const void* a, size_t a_stride, int64_t n, void* packed);

}  // namespace revis::quant
