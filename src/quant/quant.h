// Conversion between float32 and every tensor format revis reads, and the
// scalar dot products the model's matrix multiplications are built on.
//
// Layouts are bit-exact with GGUF's blocks (docs/formats.md). All functions
// take n = number of values, a multiple of the type's block size. They are
// pure functions of their inputs and safe to call from any thread.
//
// Dot products: a weight row of type W is multiplied with an activation row
// that was first converted to activation_type(W): Q8_0 for the 32-blocks,
// Q8_K for the 256-blocks (K-quants, IQ4_XS, the IQ1/IQ2/IQ3 grid types),
// F16/BF16/F32 for float weights. This mirrors what llama.cpp does, so
// results agree closely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "quant/types.h"
#include "revis/status.h"

namespace revis {

// IEEE half and bfloat16 <-> float.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);   // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);   // round to nearest even

// True if dequantize_row works for this type (every type in types.h but Q8_1).
bool can_dequantize(TensorType type);
// True if quantize_row works for this type: not for Q8_1 nor the IQ1/IQ2
// grid types (written by quantize_row_with_importance).
bool can_quantize(TensorType type);

void dequantize_row(TensorType type, const void* src, float* dst, int64_t n);

// The index of the first block of the n values at data whose scale no
// encoder writes (MXFP4's exponent 0xff, NaN in the OCP spec), or -1 when
// every block is valid or the type has no such encoding.
int64_t first_invalid_block(TensorType type, const void* data, int64_t n);
void quantize_row(TensorType type, const float* src, void* dst, int64_t n);

// Quantizers that take an importance matrix's weights: importance[i] > 0
// weighs the squared error of value i (for a weight row, the mean squared
// activation of its input channel i), n values. Q2_K, Q3_K, IQ4_XS and the
// grid types. quantize_needs_importance: the IQ1 and IQ2 types, which have
// no quantize_row: at two bits and less the search must know which values
// to keep.
bool can_quantize_with_importance(TensorType type);
bool quantize_needs_importance(TensorType type);
void quantize_row_with_importance(TensorType type, const float* src, void* dst, int64_t n, const float* importance);

// The grid an IQ1/IQ2/IQ3 type's indices point into, as bytes: byte i is
// value i of the grid read in order, so a point of 8 values (IQ1, IQ2) is
// bytes 8p..8p+7 and a point of 4 values (IQ3) bytes 4p..4p+3; IQ1's values
// are int8 (-1, 0, 1), the others unsigned. For a device that looks points
// up in its own memory (model/device_layers.h). Empty for a type without a
// grid.
std::span<const std::byte> grid_bytes(TensorType type);

// The format an activation row is converted to before vec_dot with weights of type w.
TensorType activation_type(TensorType w);

// sum_i w[i] * a[i], where w is a row of type w_type and a a row of
// activation_type(w_type), both n values long.
float vec_dot(TensorType w_type, const void* w, const void* a, int64_t n);

// out[k] = vec_dot(w_type, w, a + k * a_stride, n) for k = 0..3: one weight
// row against four activation rows a_stride bytes apart. SIMD kernels
// unpack each weight block once for the four, which is what makes batched
// matrix products (prompt processing) faster than four vec_dot calls.
void vec_dot4(TensorType w_type, const void* w, const void* a, size_t a_stride, int64_t n, float* out);

// A faster form of dot (one activation row) or dot4 (four) for when many
// weight rows meet the same activation rows (a matrix times a token or a
// batch): pack() rearranges the rows once into bytes(n) bytes of the
// backend's own layout (values interleaved as the kernel loads them, scales
// already converted), and dot() then takes one weight row against them,
// one result per activation row; its results equal dot's and dot4's up to
// float summation order. pack() reads one row, or four a_stride bytes
// apart. For k a multiple of 256 the layout of values k.. starts at byte
// bytes(k), so a row can be taken in slices of columns (MatMul does).
//
// Where repack_weights is set, dot() takes its weight row in the kernel's
// own layout too: repack_weights() rewrites `rows` stored rows, w_stride
// bytes apart, into rows of weight_bytes(n) bytes one after another, and
// again the layout of values k.. starts at weight_bytes(k). It pays where
// a tile of rows meets many packed groups (MatMul repacks each tile once
// per matrix product).
//
// With weight_rows > 1 the repacked rows go in stripes of weight_rows rows
// interleaved (the last stripe filled up with zero rows), and dot() takes
// a whole stripe: out[k * weight_rows + r] is row r's product with
// activation row k. A stripe holds weight_rows x weight_bytes(n) bytes,
// its values k.. starting at weight_rows x weight_bytes(k).
//
// A stripe form may also have dot_one: a whole stripe against the first
// activation row of a packed group only, out[r] for r < weight_rows, the
// same bits as dot's out[r] (each row's and token's float steps are the
// same, so a token's products do not depend on whether it went alone or in
// a group). That is what lets a model keep such matrices in stripes for
// good (MatMul's single tokens then take dot_one).
struct PackedDot {
  size_t (*bytes)(int64_t n);
  void (*pack)(const void* a, size_t a_stride, int64_t n, void* packed);
  void (*dot)(const void* w, const void* packed, int64_t n, float* out);
  size_t (*weight_bytes)(int64_t n) = nullptr;
  void (*repack_weights)(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out) = nullptr;
  int weight_rows = 1;
  void (*dot_one)(const void* w, const void* packed, int64_t n, float* out) = nullptr;
  // A one-token form (weight_rows 1, no repack_weights) may have dot4: one
  // stored row against four activation rows, each packed by pack() alone,
  // packed_stride bytes apart; out[k] is the very bits dot() gives row k.
  void (*dot4)(const void* w, const void* packed, size_t packed_stride, int64_t n, float* out) = nullptr;
  // A stripe form may have lane_dot: one row where it is stored (never
  // repacked) against one activation row in activation_type's format (not
  // packed), giving the very bits dot_one gives that row in its stripe.
  // With it, a matrix read from a mapped file meets single tokens without
  // being repacked and still agrees with its stripes bit for bit.
  float (*lane_dot)(const void* w, const void* a, int64_t n) = nullptr;
};
// The most weight_rows of any packed form.
inline constexpr int kMaxStripeRows = 16;

// vec_dot's and vec_dot4's kernels for weight type w_type and rows of n
// values, looked up and checked once, for loops over many rows. dot4 is
// null where the active backend has no four-row kernel for the type: call
// dot per row then. packed1 and packed4 are null where it has no packed
// form of dot and dot4. dot4_exact: dot4's out[k] is the very bits dot
// gives activation row k (each row's float steps in the same order).
struct DotKernels {
  float (*dot)(const void* w, const void* a, int64_t n);
  void (*dot4)(const void* w, const void* a, size_t a_stride, int64_t n, float* out);
  const PackedDot* packed1;
  const PackedDot* packed4;
  bool dot4_exact;
};
DotKernels dot_kernels(TensorType w_type, int64_t n);

// packed4 where it is a stripe form with dot_one (weight_rows > 1): the
// form in which every row's products are the same bits for one token or
// four, so that a model keeps or reads matrices of this type in stripes
// (striped_weights.h, matmul.h). Null where the active backend has none.
const PackedDot* stripe_form(TensorType w_type, int64_t n);

// Kernel implementations. The best one the CPU supports is chosen at first
// use; the scalar reference is always available, and on x86-64 so is AVX2
// where AVX-512 is. use_kernel_backend() is for tests and benchmarks, and
// must not race with running kernels.
enum class KernelBackend { kScalar, kAvx2, kAvx512, kNeon };
// Every backend, supported here or not.
inline constexpr KernelBackend kKernelBackends[] = {KernelBackend::kScalar, KernelBackend::kAvx2,
                                                   KernelBackend::kAvx512, KernelBackend::kNeon};
KernelBackend best_kernel_backend();
// Compiled into this binary (whether or not this CPU can run it).
bool kernel_backend_built_in(KernelBackend backend);
bool kernel_backend_supported(KernelBackend backend);
KernelBackend active_kernel_backend();
Status use_kernel_backend(KernelBackend backend);
const char* kernel_backend_name(KernelBackend backend);
// "scalar", "avx2", "avx512" or "neon"; an error naming the choices otherwise.
Result<KernelBackend> parse_kernel_backend(std::string_view name);

}  // namespace revis
