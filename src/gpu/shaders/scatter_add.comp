#version 450
// x[index[first + i]] += weight[first + i] * y[i] for `count` rows of
// `width` floats: one expert's outputs, weighted, back into its tokens'
// rows (each token at most once per expert, so no two threads meet).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) readonly buffer I { uint index[]; };
layout(std430, binding = 3) readonly buffer Wt { float weight[]; };
layout(push_constant) uniform Push { uint width, count, first; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i >= p.width * p.count) return;
  const uint row = i / p.width, col = i % p.width;
  x[index[p.first + row] * p.width + col] += weight[p.first + row] * y[i];
}
