// SIMD backends plug faster kernels into the dispatch table. Each backend
// overrides some entries (a null entry keeps the scalar kernel) and must
// give results equal to the scalar reference: bit-identical for activation
// quantization, within float summation-order rounding for dot products
// (tests/quant/simd_test.cpp checks both on random data and odd lengths).
//
// Internal to src/quant.
#pragma once

#include <cstdint>

#include "quant/kernels.h"
#include "quant/types.h"

namespace revis::quant {

// Kernels for one weight type.
struct KernelEntry {
  DequantizeFn dequantize = nullptr;
  QuantizeFn quantize = nullptr;
  DotFn dot = nullptr;
  Dot4Fn dot4 = nullptr;  // null: four calls of dot
};

// Called once per backend with a function to record an override.
using OverrideFn = void (*)(TensorType type, const KernelEntry& entry);

// simd_avx2.cpp (x86-64, compiled with -mavx2 -mfma -mf16c)
bool avx2_supported();
void install_avx2(OverrideFn record);

// simd_neon.cpp (AArch64)
bool neon_supported();
void install_neon(OverrideFn record);

}  // namespace revis::quant
