#version 450
// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight, one workgroup per row
// (a token's row, or one head of it: `width` values `stride` apart), the
// squares summed in a fixed order (reduce.glsl). out may be x.
#define REDUCE_WIDTH 1u
#include "reduce.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float weight[]; };
layout(std430, binding = 2) buffer O { float o[]; };
layout(push_constant) uniform Push {
  uint width, stride, x_offset, o_offset;
  float eps;
} p;

void main() {
  const uint tid = gl_LocalInvocationID.x, row = gl_WorkGroupID.x;
  const uint xb = p.x_offset + row * p.stride, ob = p.o_offset + row * p.stride;
  float s[1] = float[1](0.0);
  for (uint i = tid; i < p.width; i += 64u) s[0] += x[xb + i] * x[xb + i];
  workgroup_reduce(s, false);
  const float scale = 1.0 / sqrt(s[0] / float(p.width) + p.eps);
  for (uint i = tid; i < p.width; i += 64u) o[ob + i] = x[xb + i] * scale * weight[i];
}
