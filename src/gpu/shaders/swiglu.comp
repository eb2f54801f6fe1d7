#version 450
// gate[i] = silu(gate[i]) * up[i]: the gated FFN's activation.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer G { float gate[]; };
layout(std430, binding = 1) readonly buffer U { float up[]; };
layout(push_constant) uniform Push { uint n; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i >= p.n) return;
  const float g = gate[i];
  gate[i] = g / (1.0 + exp(-g)) * up[i];
}
