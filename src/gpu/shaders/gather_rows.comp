#version 450
// out[i] = x[index[first + i]] for `count` rows of `width` floats: the rows
// of the tokens routed to one expert, side by side.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer I { uint index[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };
layout(push_constant) uniform Push { uint width, count, first; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i >= p.width * p.count) return;
  const uint row = i / p.width, col = i % p.width;
  o[i] = x[index[p.first + row] * p.width + col];
}
