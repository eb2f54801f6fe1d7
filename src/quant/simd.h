// SIMD backends plug faster kernels into the dispatch table. Each backend
// overrides some entries (a null entry keeps the scalar kernel) and must
// give results equal to the scalar reference: bit-identical for activation
// quantization, within float summation-order rounding for dot products
// (tests/quant/simd_test.cpp checks both on random data and odd lengths).
//
// Internal to src/quant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/kernels.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace revis::quant {

// Kernels for one weight type.
struct KernelEntry {
  DequantizeFn dequantize = nullptr;
  QuantizeFn quantize = nullptr;
  DotFn dot = nullptr;
  Dot4Fn dot4 = nullptr;  // null: four calls of dot
  bool dot4_exact = false;  // quant.h's DotKernels::dot4_exact
  const PackedDot* packed1 = nullptr;
  const PackedDot* packed4 = nullptr;
};

// Called once per backend with a function to record an override.
using OverrideFn = void (*)(TensorType type, const KernelEntry& entry);

// The shape both backends write their dot products in: one function over
// R activation rows `stride` bytes apart (R = 1 for vec_dot, 4 for dot4),
// which unpacks each weight block once and uses it for all R rows. These
// adapt such a function to the table's DotFn and Dot4Fn.
using RowsKernel = void (*)(const void* w, const uint8_t* a, size_t stride, int64_t n, float* out);

template <RowsKernel kRows>
float dot_one(const void* w, const void* a, int64_t n) {
  float out;
  kRows(w, static_cast<const uint8_t*>(a), 0, n, &out);
  return out;
}

template <RowsKernel kRows>
void dot_four(const void* w, const void* a, size_t stride, int64_t n, float* out) {
  kRows(w, static_cast<const uint8_t*>(a), stride, n, out);
}

template <RowsKernel kOne, RowsKernel kFour>
KernelEntry dots() {
  return {.dot = dot_one<kOne>, .dot4 = dot_four<kFour>};
}

// simd_avx2.cpp (x86-64, compiled with -mavx2 -mfma -mf16c)
bool avx2_supported();
// AVX2 with AVX-VNNI (256-bit vpdpbusd): install_avx2 then keeps Q8_0,
// Q4_0 and MXFP4 in stripes of eight rows.
bool avx_vnni_supported();
void install_avx2(OverrideFn record);

// simd_avx512.cpp (x86-64, compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni -mbmi2 besides AVX2's flags): install_avx2()'s kernels with the
// heaviest types overridden.
bool avx512_supported();
void install_avx512(OverrideFn record);

// simd_neon.cpp (AArch64)
bool neon_supported();
void install_neon(OverrideFn record);

}  // namespace revis::quant
