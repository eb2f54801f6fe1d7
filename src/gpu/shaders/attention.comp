#version 450
// Causal attention of one sequence's rows against its cache: one workgroup
// per (row, query head), the row at position n_past + t seeing positions
// 0..n_past + t of its KV head (grouped-query). Positions go 64 at a time,
// one per thread for the scores, with the softmax kept online (a running
// maximum and sum that each block rescales), so any context length runs in
// the same shared memory: flash attention's order. A position's value is
// the first value_dim halves of its row in the value cache, rows head_dim
// apart: the whole row for grouped attention; for multi-head latent
// attention the latent of the key row itself (both caches bound to one
// buffer). The block's maximum and sum go through reduce.glsl.
#define REDUCE_WIDTH 1u
#include "reduce.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer KC { uint key_cache[]; };
layout(std430, binding = 2) readonly buffer VC { uint value_cache[]; };
layout(std430, binding = 3) writeonly buffer O { float o[]; };
layout(push_constant) uniform Push {
  uint row0, n_past, n_head, n_head_kv;
  uint head_dim, n_ctx, value_dim;
  float scale;
} p;

shared float query[576];  // head_dim <= 576 (DeepSeek's latent and RoPE key)
shared float weight[64];

float block_reduce(float v, bool take_max) {
  float r[1] = float[1](v);
  workgroup_reduce(r, take_max);
  return r[0];
}

void main() {
  const uint tid = gl_LocalInvocationID.x, t = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
  const uint hd = p.head_dim, row = p.row0 + t, kh = h / (p.n_head / p.n_head_kv);
  const uint keys = p.n_past + t + 1u;
  const uint head_base = kh * p.n_ctx * hd / 2u;
  for (uint i = tid; i < hd; i += 64u) query[i] = q[(row * p.n_head + h) * hd + i];
  barrier();
  float running_max = -1.0 / 0.0, running_sum = 0.0;
  float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);  // dims tid, tid + 64, ... (value_dim <= 512)
  for (uint first = 0u; first < keys; first += 64u) {
    const uint pos = first + tid;
    float score = -1.0 / 0.0;
    if (pos < keys) {
      const uint kb = head_base + pos * hd / 2u;
      float s = 0.0;
      for (uint i = 0u; i < hd / 2u; ++i) {
        const vec2 kv = unpackHalf2x16(key_cache[kb + i]);
        s += query[2u * i] * kv.x + query[2u * i + 1u] * kv.y;
      }
      score = s * p.scale;
    }
    const float block_max = block_reduce(score, true);
    const float new_max = max(running_max, block_max);
    const float e = pos < keys ? exp(score - new_max) : 0.0;
    weight[tid] = e;
    const float block_sum = block_reduce(e, false);
    const float rescale = exp(running_max - new_max);
    running_sum = running_sum * rescale + block_sum;
    running_max = new_max;
    const uint n = min(64u, keys - first);
    for (uint j = 0u; j < 8u; ++j) {
      const uint dim = tid + 64u * j;
      if (dim >= p.value_dim) break;
      float a = acc[j] * rescale;
      for (uint i = 0u; i < n; ++i) {
        const uint vb = head_base + (first + i) * hd / 2u + dim / 2u;
        const vec2 pair = unpackHalf2x16(value_cache[vb]);
        a += weight[i] * ((dim & 1u) != 0u ? pair.y : pair.x);
      }
      acc[j] = a;
    }
    barrier();
  }
  for (uint j = 0u; j < 8u; ++j) {
    const uint dim = tid + 64u * j;
    if (dim < p.value_dim) o[(row * p.n_head + h) * p.value_dim + dim] = acc[j] / running_sum;
  }
}
