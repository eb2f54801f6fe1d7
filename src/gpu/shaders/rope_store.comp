#version 450
// One sequence's rows of a chunk after the Q/K/V products: each query and
// key head normed (QK-norm, where the model has it) and turned by RoPE, the
// keys and values then rounded to float16 into the sequence's cache. One
// workgroup per (row, head); heads n_head.. are the KV heads. cos and sin
// come from the host per row and pair (model/rope.h's angles, times its
// magnitude), so every RoPE variant revis has turns the same here.
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Q { float q[]; };
layout(std430, binding = 1) buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer QN { float q_norm[]; };
layout(std430, binding = 4) readonly buffer KN { float k_norm[]; };
layout(std430, binding = 5) readonly buffer Angles { vec2 angle[]; };  // (cos, sin) per row and pair
layout(std430, binding = 6) buffer KC { uint key_cache[]; };           // float16 pairs, [head][position][dim]
layout(std430, binding = 7) buffer VC { uint value_cache[]; };
layout(push_constant) uniform Push {
  uint row0, n_past, n_head, n_head_kv;
  uint head_dim, rope_dims, neox, qk_norm;
  uint n_ctx, angle_row0;
  float eps;
} p;

shared float head[256];
shared float partial[64];

void main() {
  const uint tid = gl_LocalInvocationID.x, t = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
  const uint row = p.row0 + t, pos = p.n_past + t, hd = p.head_dim;
  const bool is_query = h < p.n_head;
  const uint kh = h - p.n_head;
  const uint base = is_query ? row * p.n_head * hd + h * hd : row * p.n_head_kv * hd + kh * hd;
  for (uint i = tid; i < hd; i += 64u) head[i] = is_query ? q[base + i] : k[base + i];
  barrier();
  if (p.qk_norm != 0u) {
    float s = 0.0;
    for (uint i = tid; i < hd; i += 64u) s += head[i] * head[i];
    partial[tid] = s;
    barrier();
    for (uint stride = 32u; stride > 0u; stride >>= 1) {
      if (tid < stride) partial[tid] += partial[tid + stride];
      barrier();
    }
    const float scale = 1.0 / sqrt(partial[0] / float(hd) + p.eps);
    barrier();
    for (uint i = tid; i < hd; i += 64u) head[i] = head[i] * scale * (is_query ? q_norm[i] : k_norm[i]);
    barrier();
  }
  const uint pairs = p.rope_dims / 2u;
  for (uint i = tid; i < pairs; i += 64u) {
    const vec2 cs = angle[(p.angle_row0 + t) * pairs + i];
    const uint ia = p.neox != 0u ? i : 2u * i, ib = p.neox != 0u ? i + pairs : 2u * i + 1u;
    const float a = head[ia], b = head[ib];
    head[ia] = a * cs.x - b * cs.y;
    head[ib] = a * cs.y + b * cs.x;
  }
  barrier();
  if (is_query) {
    for (uint i = tid; i < hd; i += 64u) q[base + i] = head[i];
    return;
  }
  const uint cache = ((kh * p.n_ctx) + pos) * hd / 2u;
  for (uint i = tid; i < hd / 2u; i += 64u) {
    key_cache[cache + i] = packHalf2x16(vec2(head[2u * i], head[2u * i + 1u]));
    value_cache[cache + i] = packHalf2x16(vec2(v[base + 2u * i], v[base + 2u * i + 1u]));
  }
}
