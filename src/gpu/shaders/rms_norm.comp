#version 450
// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight, one workgroup per row
// (a token's row, or one head of it: `width` values `stride` apart), the
// squares summed in a fixed tree. out may be x.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float weight[]; };
layout(std430, binding = 2) buffer O { float o[]; };
layout(push_constant) uniform Push {
  uint width, stride, x_offset, o_offset;
  float eps;
} p;

shared float partial[64];

void main() {
  const uint tid = gl_LocalInvocationID.x, row = gl_WorkGroupID.x;
  const uint xb = p.x_offset + row * p.stride, ob = p.o_offset + row * p.stride;
  float s = 0.0;
  for (uint i = tid; i < p.width; i += 64u) s += x[xb + i] * x[xb + i];
  partial[tid] = s;
  barrier();
  for (uint stride = 32u; stride > 0u; stride >>= 1) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    barrier();
  }
  const float scale = 1.0 / sqrt(partial[0] / float(p.width) + p.eps);
  for (uint i = tid; i < p.width; i += 64u) o[ob + i] = x[xb + i] * scale * weight[i];
}
