// The exported half / bfloat16 conversions of quant.h; the bit-level work
// is in half.h, shared inline with the row kernels.
#include "quant/half.h"
#include "quant/quant.h"

namespace revis {

float fp16_to_fp32(uint16_t h) { return quant::half_to_float(h); }
uint16_t fp32_to_fp16(float f) { return quant::float_to_half(f); }
float bf16_to_fp32(uint16_t h) { return quant::bfloat_to_float(h); }
uint16_t fp32_to_bf16(float f) { return quant::float_to_bfloat(f); }

}  // namespace revis
