#version 450
// x[i] = 0 for i < n.
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer X { float x[]; };
layout(push_constant) uniform Push { uint n; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i < p.n) x[i] = 0.0;
}
