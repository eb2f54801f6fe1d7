// quant.h's entry points: one table maps each TensorType to its kernels and
// activation format, and the public functions check their preconditions
// and forward. Calling a kernel a type does not have, or with a row length
// that is not whole blocks, is a programming error: it aborts with a message
// instead of reading past a buffer.
//
// The table starts with the scalar reference kernels; the best SIMD backend
// the CPU supports then overrides the entries it has (see simd.h).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "quant/kernels.h"
#include "quant/quant.h"
#include "quant/simd.h"

namespace revis {
namespace {

struct Kernels {
  TensorType type;
  TensorType activation;
  quant::DequantizeFn dequantize;
  quant::QuantizeFn quantize;  // null for the types revis reads but cannot write
  quant::DotFn dot;
  quant::Dot4Fn dot4 = nullptr;  // null: vec_dot4 calls dot four times
  bool dot4_exact = false;
  const PackedDot* packed1 = nullptr;
  const PackedDot* packed4 = nullptr;
};

// Q8_1 is absent on purpose: llama.cpp uses it only as a GPU-side
// activation format, and no model file revis reads stores it.
constexpr Kernels kScalarKernels[] = {
    {TensorType::F32, TensorType::F32, quant::dequantize_f32, quant::quantize_f32, quant::dot_f32},
    {TensorType::F16, TensorType::F16, quant::dequantize_f16, quant::quantize_f16, quant::dot_f16},
    {TensorType::BF16, TensorType::BF16, quant::dequantize_bf16, quant::quantize_bf16, quant::dot_bf16},
    {TensorType::Q4_0, TensorType::Q8_0, quant::dequantize_q4_0, quant::quantize_q4_0, quant::dot_q4_0},
    {TensorType::Q4_1, TensorType::Q8_0, quant::dequantize_q4_1, quant::quantize_q4_1, quant::dot_q4_1},
    {TensorType::Q5_0, TensorType::Q8_0, quant::dequantize_q5_0, quant::quantize_q5_0, quant::dot_q5_0},
    {TensorType::Q5_1, TensorType::Q8_0, quant::dequantize_q5_1, quant::quantize_q5_1, quant::dot_q5_1},
    {TensorType::Q8_0, TensorType::Q8_0, quant::dequantize_q8_0, quant::quantize_q8_0, quant::dot_q8_0},
    {TensorType::Q2_K, TensorType::Q8_K, quant::dequantize_q2_k, quant::quantize_uniform<quant::quantize_q2_k>, quant::dot_q2_k},
    {TensorType::Q3_K, TensorType::Q8_K, quant::dequantize_q3_k, quant::quantize_uniform<quant::quantize_q3_k>, quant::dot_q3_k},
    {TensorType::Q4_K, TensorType::Q8_K, quant::dequantize_q4_k, quant::quantize_q4_k, quant::dot_q4_k},
    {TensorType::Q5_K, TensorType::Q8_K, quant::dequantize_q5_k, quant::quantize_q5_k, quant::dot_q5_k},
    {TensorType::Q6_K, TensorType::Q8_K, quant::dequantize_q6_k, quant::quantize_q6_k, quant::dot_q6_k},
    {TensorType::Q8_K, TensorType::Q8_K, quant::dequantize_q8_k, quant::quantize_q8_k, quant::dot_q8_k},
    {TensorType::IQ4_NL, TensorType::Q8_0, quant::dequantize_iq4_nl, quant::quantize_iq4_nl, quant::dot_iq4_nl},
    {TensorType::MXFP4, TensorType::Q8_0, quant::dequantize_mxfp4, quant::quantize_mxfp4, quant::dot_mxfp4},
    {TensorType::IQ4_XS, TensorType::Q8_K, quant::dequantize_iq4_xs, quant::quantize_uniform<quant::quantize_iq4_xs>, quant::dot_iq4_xs},
    // IQ1 and IQ2 have no plain quantizer: at two bits and below the search
    // must know which values to keep (quantize_row_with_importance).
    {TensorType::IQ2_XXS, TensorType::Q8_K, quant::dequantize_iq2_xxs, nullptr, quant::dot_iq2_xxs},
    {TensorType::IQ2_XS, TensorType::Q8_K, quant::dequantize_iq2_xs, nullptr, quant::dot_iq2_xs},
    {TensorType::IQ2_S, TensorType::Q8_K, quant::dequantize_iq2_s, nullptr, quant::dot_iq2_s},
    {TensorType::IQ3_XXS, TensorType::Q8_K, quant::dequantize_iq3_xxs, quant::quantize_uniform<quant::quantize_iq3_xxs>, quant::dot_iq3_xxs},
    {TensorType::IQ3_S, TensorType::Q8_K, quant::dequantize_iq3_s, quant::quantize_uniform<quant::quantize_iq3_s>, quant::dot_iq3_s},
    {TensorType::IQ1_S, TensorType::Q8_K, quant::dequantize_iq1_s, nullptr, quant::dot_iq1_s},
    {TensorType::IQ1_M, TensorType::Q8_K, quant::dequantize_iq1_m, nullptr, quant::dot_iq1_m},
};

// The quantizers that weigh each value's error by an importance.
struct WeightedQuantizer {
  TensorType type;
  quant::QuantizeWeightedFn quantize;
};
constexpr WeightedQuantizer kWeightedQuantizers[] = {
    {TensorType::Q2_K, quant::quantize_q2_k},       {TensorType::Q3_K, quant::quantize_q3_k},
    {TensorType::IQ4_XS, quant::quantize_iq4_xs},   {TensorType::IQ2_XXS, quant::quantize_iq2_xxs},
    {TensorType::IQ2_XS, quant::quantize_iq2_xs},   {TensorType::IQ3_XXS, quant::quantize_iq3_xxs},
    {TensorType::IQ3_S, quant::quantize_iq3_s},     {TensorType::IQ2_S, quant::quantize_iq2_s},
    {TensorType::IQ1_S, quant::quantize_iq1_s},     {TensorType::IQ1_M, quant::quantize_iq1_m},
};

const WeightedQuantizer* find_weighted(TensorType type) {
  for (const WeightedQuantizer& q : kWeightedQuantizers)
    if (q.type == type) return &q;
  return nullptr;
}

constexpr size_t kTypeCount = sizeof(kScalarKernels) / sizeof(kScalarKernels[0]);

// The active table: the scalar kernels with the chosen backend's overrides.
struct ActiveTable {
  Kernels kernels[kTypeCount];
  KernelBackend backend = KernelBackend::kScalar;
};

// The table install() is filling. record_override reaches it through this
// rather than active_table(): the first install runs inside active_table()'s
// own initialisation, and an OverrideFn carries no context.
ActiveTable* installing = nullptr;

void record_override(TensorType type, const quant::KernelEntry& entry) {
  for (Kernels& k : installing->kernels) {
    if (k.type != type) continue;
    if (entry.dequantize) k.dequantize = entry.dequantize;
    if (entry.quantize) k.quantize = entry.quantize;
    if (entry.dot) k.dot = entry.dot;
    if (entry.dot4) k.dot4 = entry.dot4;
    if (entry.dot || entry.dot4) k.dot4_exact = entry.dot4_exact;  // a claim about the pair as it now is
    if (entry.packed1) k.packed1 = entry.packed1;
    if (entry.packed4) k.packed4 = entry.packed4;
  }
}

void install(ActiveTable& table, KernelBackend backend) {
  for (size_t i = 0; i < kTypeCount; ++i) table.kernels[i] = kScalarKernels[i];
  table.backend = backend;
  installing = &table;
#if defined(__x86_64__)
  if (backend == KernelBackend::kAvx2) quant::install_avx2(record_override);
  if (backend == KernelBackend::kAvx512) quant::install_avx512(record_override);
#elif defined(__aarch64__)
  if (backend == KernelBackend::kNeon) quant::install_neon(record_override);
#endif
  installing = nullptr;
}

ActiveTable& active_table() {
  static ActiveTable table;
  static const bool initialised = [] {
    install(table, best_kernel_backend());
    return true;
  }();
  (void)initialised;
  return table;
}

const Kernels* find_kernels(TensorType type) {
  for (const Kernels& k : active_table().kernels)
    if (k.type == type) return &k;
  return nullptr;
}

[[noreturn]] void fail(const char* function, TensorType type, const char* why) {
  const TypeTraits* traits = type_traits(static_cast<uint32_t>(type));
  std::fprintf(stderr, "revis: %s(%s): %s\n", function, traits ? traits->name : "unknown type", why);
  std::abort();
}

const Kernels& checked_kernels(const char* function, TensorType type, int64_t n) {
  const Kernels* kernels = find_kernels(type);
  if (kernels == nullptr) fail(function, type, "type not supported");
  if (n < 0 || n % type_traits(type).block_size != 0) fail(function, type, "row length is not a whole number of blocks");
  return *kernels;
}

}  // namespace

bool kernel_backend_built_in(KernelBackend backend) {
  switch (backend) {
    case KernelBackend::kScalar: return true;
#if defined(__x86_64__)
    case KernelBackend::kAvx2:
    case KernelBackend::kAvx512: return true;
#elif defined(__aarch64__)
    case KernelBackend::kNeon: return true;
#endif
    default: return false;
  }
}

bool kernel_backend_supported(KernelBackend backend) {
  switch (backend) {
    case KernelBackend::kScalar: return true;
#if defined(__x86_64__)
    case KernelBackend::kAvx2: return quant::avx2_supported();
    case KernelBackend::kAvx512: return quant::avx512_supported();
#elif defined(__aarch64__)
    case KernelBackend::kNeon: return quant::neon_supported();
#endif
    default: return false;
  }
}

KernelBackend best_kernel_backend() {
#if defined(__x86_64__)
  if (quant::avx512_supported()) return KernelBackend::kAvx512;
  if (quant::avx2_supported()) return KernelBackend::kAvx2;
#elif defined(__aarch64__)
  if (quant::neon_supported()) return KernelBackend::kNeon;
#endif
  return KernelBackend::kScalar;
}

KernelBackend active_kernel_backend() { return active_table().backend; }

Status use_kernel_backend(KernelBackend backend) {
  if (!kernel_backend_supported(backend))
    return Status::error(std::string("kernel backend ") + kernel_backend_name(backend) + " is not available on this CPU");
  install(active_table(), backend);
  return {};
}

const char* kernel_backend_name(KernelBackend backend) {
  switch (backend) {
    case KernelBackend::kScalar: return "scalar";
    case KernelBackend::kAvx2: return "avx2";
    case KernelBackend::kAvx512: return "avx512";
    case KernelBackend::kNeon: return "neon";
  }
  return "?";
}

Result<KernelBackend> parse_kernel_backend(std::string_view name) {
  for (KernelBackend backend : kKernelBackends)
    if (name == kernel_backend_name(backend)) return backend;
  return Status::error("unknown kernel backend '" + std::string(name) + "' (expected scalar, avx2, avx512 or neon)");
}

bool can_dequantize(TensorType type) { return find_kernels(type) != nullptr; }

bool can_quantize_with_importance(TensorType type) { return find_weighted(type) != nullptr; }

bool quantize_needs_importance(TensorType type) { return can_quantize_with_importance(type) && !can_quantize(type); }

void quantize_row_with_importance(TensorType type, const float* src, void* dst, int64_t n, const float* importance) {
  checked_kernels("quantize_row_with_importance", type, n);
  const WeightedQuantizer* q = find_weighted(type);
  if (q == nullptr) fail("quantize_row_with_importance", type, "no quantizer with importance for this type");
  q->quantize(src, dst, n, importance);
}

bool can_quantize(TensorType type) {
  const Kernels* kernels = find_kernels(type);
  return kernels != nullptr && kernels->quantize != nullptr;
}

void dequantize_row(TensorType type, const void* src, float* dst, int64_t n) {
  checked_kernels("dequantize_row", type, n).dequantize(src, dst, n);
}

int64_t first_invalid_block(TensorType type, const void* data, int64_t n) {
  checked_kernels("first_invalid_block", type, n);
  return type == TensorType::MXFP4 ? quant::first_invalid_mxfp4_block(data, n) : -1;
}

void quantize_row(TensorType type, const float* src, void* dst, int64_t n) {
  const Kernels& kernels = checked_kernels("quantize_row", type, n);
  if (kernels.quantize == nullptr)
    fail("quantize_row", type,
         can_quantize_with_importance(type) ? "this type needs an importance matrix (quantize_row_with_importance)"
                                            : "no quantizer for this type");
  kernels.quantize(src, dst, n);
}

TensorType activation_type(TensorType w) {
  const Kernels* kernels = find_kernels(w);
  if (kernels == nullptr) fail("activation_type", w, "type not supported");
  return kernels->activation;
}

float vec_dot(TensorType w_type, const void* w, const void* a, int64_t n) {
  return checked_kernels("vec_dot", w_type, n).dot(w, a, n);
}

void vec_dot4(TensorType w_type, const void* w, const void* a, size_t a_stride, int64_t n, float* out) {
  const Kernels& k = checked_kernels("vec_dot4", w_type, n);
  if (k.dot4) {
    k.dot4(w, a, a_stride, n, out);
    return;
  }
  const auto* rows = static_cast<const uint8_t*>(a);
  for (int i = 0; i < 4; ++i) out[i] = k.dot(w, rows + i * a_stride, n);
}

DotKernels dot_kernels(TensorType w_type, int64_t n) {
  const Kernels& k = checked_kernels("dot_kernels", w_type, n);
  return {k.dot, k.dot4, k.packed1, k.packed4, k.dot4_exact};
}

const PackedDot* stripe_form(TensorType w_type, int64_t n) {
  const PackedDot* form = checked_kernels("stripe_form", w_type, n).packed4;
  return form && form->weight_rows > 1 && form->dot_one && form->repack_weights ? form : nullptr;
}

}  // namespace revis
