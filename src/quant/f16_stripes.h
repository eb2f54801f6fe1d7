// F16 weights in stripes of rows: the packed form of dot4 (quant.h's
// PackedDot) that the x86 kernels keep F16 matrices in, kRows rows at once
// (sixteen on AVX-512, eight on AVX2).
//
// Why: a row of halves against a token sums its products across a
// register's lanes, and a row against four tokens does that four times per
// row; with a stripe of rows one per lane, a column's kRows halves convert
// to floats in one instruction and meet a token's value, broadcast, in one
// multiply-add, and no lane is ever folded into another. Each lane's sum
// then has the same float steps whether one token or four pass, which is
// what a model kept in stripes needs (dot_one).
//
// Weights, a stripe of kRows rows: for each column c, the kRows rows'
// halves at c, row after row (2 x kRows bytes); a stripe's values k..
// start at byte kRows x 2k. A stripe whose rows run out is filled up with
// zero rows. Activations, four F16 rows: for each column c, the four rows'
// values at c as floats (16 bytes); values k.. start at byte 16k.
//
// Internal to src/quant.
#pragma once

#include <cstddef>
#include <cstdint>

namespace revis::quant {

template <int kRows>
struct F16Stripes {
  static constexpr size_t kColumnBytes = 2 * kRows;

  static size_t bytes(int64_t n) { return static_cast<size_t>(n) * 4 * sizeof(float); }
  static void pack(const void* a, size_t a_stride, int64_t n, void* packed);
  static size_t weight_bytes(int64_t n) { return static_cast<size_t>(n) * sizeof(uint16_t); }
  static void repack(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out);
};

}  // namespace revis::quant
