#version 450
// x[i] += y[i] for i < n; with `rows` > 0, y is one row of `width` values
// added to each of `rows` rows (a bias).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n, width, x_offset; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i >= p.n) return;
  x[p.x_offset + i] += y[p.width > 0u ? i % p.width : i];
}
