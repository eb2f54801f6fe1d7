// The packed form of four Q8_0 activation rows (quant.h's PackedDot4) that
// the x86 kernels of the Q8_0-activation types share. For each pair of
// blocks: the four rows' 64 values (the two blocks' 32 each, row after row),
// then the four rows' scales as 16 floats each (the first block's eight
// times, then the second's). A kernel's loop over the rows is then loads and
// arithmetic, with no half to convert and no shuffle. A missing second block
// of an odd count is zeros with scale zero. 512 bytes per 64 values: four
// rows of a few thousand values stay in L1 or L2.
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

}  // namespace revis::quant
