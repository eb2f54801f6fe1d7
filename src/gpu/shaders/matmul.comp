#version 450
// out[t][r] = dot(W row r, x[t]) for every token t: one workgroup per row,
// its 64 threads taking the row's groups of 32 weights in turn, each
// token's partial sums added in a fixed order (reduce.glsl). A token's
// result thus takes the same float steps whatever the other tokens of the
// call: the device side of batch invariance (model/model.h). Tokens go
// eight at a time, so each group of weights is dequantized once per eight
// tokens. The grid types (IQ1, IQ2, IQ3) also bind their grid at 3
// (dequant.glsl).
#define REDUCE_WIDTH 8u
#include "reduce.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };
layout(push_constant) uniform Push {
  uint rows, cols, tokens, row_bytes;
  uint x_offset, x_stride, o_offset, o_stride;
  uint w_offset;  // bytes before the matrix (one expert of a stack)
} p;

#include "bytes.glsl"
#include "dequant.glsl"

const uint kTokens = REDUCE_WIDTH;

void main() {
  const uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (r >= p.rows) return;
  const uint tid = gl_LocalInvocationID.x, groups = p.cols / 32u, row = p.w_offset + r * p.row_bytes;
  for (uint t0 = 0u; t0 < p.tokens; t0 += kTokens) {
    float acc[kTokens];
    [[unroll]] for (uint j = 0u; j < kTokens; ++j) acc[j] = 0.0;
    for (uint g = tid; g < groups; g += 64u) {
      float v[32];
      dequant_group(row, g, v);
      for (uint j = 0u; j < kTokens && t0 + j < p.tokens; ++j) {
        const uint xb = p.x_offset + (t0 + j) * p.x_stride + g * 32u;
        float s = 0.0;
        [[unroll]] for (uint i = 0u; i < 32u; ++i) s += v[i] * x[xb + i];
        acc[j] += s;
      }
    }
    workgroup_reduce(acc, false);
    if (tid < kTokens && t0 + tid < p.tokens) o[p.o_offset + (t0 + tid) * p.o_stride + r] = acc[tid];
  }
}
