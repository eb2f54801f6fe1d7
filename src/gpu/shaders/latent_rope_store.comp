#version 450
// Multi-head latent attention's turn (model/attention.cpp's
// latent_attention) for one sequence's rows of a chunk, after the
// projections: one workgroup per (row, slot). Slots 0..n_head-1 are the
// query heads: each head's RoPE part [nope, nope + rope_dims) is turned and
// written after the absorbed query's latent part, where attention reads it.
// Slot n_head is the row the cache keeps, [latent (already normed) | RoPE
// key]: its key part is turned and the whole row rounded to float16 into
// the sequence's cache, one row per position. cos and sin come from the
// host per row and pair, as for rope_store.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };         // [row][head][nope | rope]
layout(std430, binding = 1) buffer QL { float q_latent[]; };          // [row][head][latent | rope]
layout(std430, binding = 2) readonly buffer K { float k[]; };         // [row][latent | rope]
layout(std430, binding = 3) readonly buffer Angles { vec2 angle[]; };  // (cos, sin) per row and pair
layout(std430, binding = 4) buffer KC { uint key_cache[]; };          // float16 pairs, [position][latent | rope]
layout(push_constant) uniform Push {
  uint row0, n_past, n_head, latent;
  uint rope_dims, nope, neox, angle_row0;
} p;

shared float cached[576];

// The two members of pair i of a rope_dims-wide part.
uvec2 pair_of(uint i) {
  const uint pairs = p.rope_dims / 2u;
  return p.neox != 0u ? uvec2(i, i + pairs) : uvec2(2u * i, 2u * i + 1u);
}

vec2 turned(vec2 ab, vec2 cs) { return vec2(ab.x * cs.x - ab.y * cs.y, ab.x * cs.y + ab.y * cs.x); }

void main() {
  const uint tid = gl_LocalInvocationID.x, t = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
  const uint row = p.row0 + t, width = p.latent + p.rope_dims, pairs = p.rope_dims / 2u;
  if (h < p.n_head) {
    const uint from = (row * p.n_head + h) * (p.nope + p.rope_dims) + p.nope;
    const uint to = (row * p.n_head + h) * width + p.latent;
    for (uint i = tid; i < pairs; i += 64u) {
      const uvec2 m = pair_of(i);
      const vec2 r = turned(vec2(q[from + m.x], q[from + m.y]), angle[(p.angle_row0 + t) * pairs + i]);
      q_latent[to + m.x] = r.x;
      q_latent[to + m.y] = r.y;
    }
    return;
  }
  for (uint i = tid; i < width; i += 64u) cached[i] = k[row * width + i];
  barrier();
  for (uint i = tid; i < pairs; i += 64u) {
    const uvec2 m = pair_of(i) + p.latent;
    const vec2 r = turned(vec2(cached[m.x], cached[m.y]), angle[(p.angle_row0 + t) * pairs + i]);
    cached[m.x] = r.x;
    cached[m.y] = r.y;
  }
  barrier();
  const uint cache = (p.n_past + t) * width / 2u;
  for (uint i = tid; i < width / 2u; i += 64u) key_cache[cache + i] = packHalf2x16(vec2(cached[2u * i], cached[2u * i + 1u]));
}
