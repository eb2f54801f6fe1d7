// Attention of the forward pass (model.h): grouped-query attention (llama,
// qwen2/3, gemma3, gemma4, gpt-oss, qwen35's gated form) and DeepSeek's multi-head latent attention, each
// writing the chunk's keys and values into every segment's own cache and
// then attending segment by segment (attend: flash attention's order).
#include <algorithm>
#include <cmath>
#include <memory>

#include "model/cache_walk.h"
#include "model/model.h"
#include "model/ops.h"
#include "quant/quant.h"

namespace revis {
namespace {

// Attention takes a chunk's queries this many at a time: every tile of the
// cache (below) is read once per block of queries.
constexpr int kAttentionQueries = 64;

// Query heads that one attention task takes together: the kernels take
// heads four at a time (ops.h); MLA's single KV head serves all the heads
// (16 to 128), which would otherwise be one task for one thread.
constexpr int kAttentionHeadsPerTask = 4;

// Room for `count` floats in `storage`, starting on a cache line. Attention's
// kernels read their rows 32 bytes at a time; from malloc's 16-byte alignment
// every other read straddled two lines, which made attention a fifth slower.
constexpr size_t kLineFloats = 64 / sizeof(float);
float* line_aligned(std::vector<float>& storage, size_t count) {
  storage.resize(count + kLineFloats);
  void* start = storage.data();
  size_t space = storage.size() * sizeof(float);
  return static_cast<float*>(std::align(kLineFloats * sizeof(float), count * sizeof(float), start, space));
}

}  // namespace

// Llama/Qwen/Gemma attention: every query head meets the keys and values of
// its group's KV head, stored per token after RoPE (gemma3's local layers
// turn with their own). A layer without a key projection (gemma4's shared
// layers) only makes queries and reads what cache layer `layer` holds.
// Head counts and widths are the layer's own (gemma4's differ by layer).
void Model::grouped_query_attention(const LayerWeights& l, int layer, int n, std::span<const Segment> segments,
                                    ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd;
  const int hk = c.key_width(layer), hv = c.value_width(layer), n_kv = c.kv_heads(layer);
  const int q_dim = c.n_head * hk, kv_dim_k = n_kv * hk, kv_dim_v = n_kv * hv;
  q_.resize(static_cast<size_t>(n) * q_dim);
  k_.resize(static_cast<size_t>(n) * kv_dim_k);
  v_.resize(static_cast<size_t>(n) * kv_dim_v);
  if (c.is_hybrid()) {
    // qwen35: each head's query is followed by its output gate.
    attn_gate_.resize(static_cast<size_t>(n) * 2 * q_dim);
    matmul_.run(pool, l.wq, xb_.data(), n, d, attn_gate_.data(), 2 * q_dim);
    for (int t = 0; t < n; ++t)
      for (int h = 0; h < c.n_head; ++h)
        std::copy_n(&attn_gate_[(static_cast<size_t>(t) * c.n_head + h) * 2 * hk], hk, &q_[t * q_dim + h * hk]);
  } else {
    matmul_.run(pool, l.wq, xb_.data(), n, d, q_.data(), q_dim);
  }
  const bool own_kv = !l.wk.empty();
  if (own_kv) matmul_.run(pool, l.wk, xb_.data(), n, d, k_.data(), kv_dim_k);
  if (!l.wv.empty())
    matmul_.run(pool, l.wv, xb_.data(), n, d, v_.data(), kv_dim_v);
  else if (own_kv)
    v_ = k_;  // gemma4 without attn_v: the values are the keys' projection (as wide: config.cpp)
  const Rope& rope = c.sliding.is_local(layer) ? local_rope_ : rope_;
  for (const Segment& s : segments)
    for (int t = s.row; t < s.row + s.n; ++t) {
      const int pos = s.n_past + t - s.row;
      KvCache& kv = *s.kv;
      float* q = &q_[t * q_dim];
      float* k = &k_[t * kv_dim_k];
      float* v = &v_[t * kv_dim_v];
      if (c.has_qkv_bias) {
        add(q, l.bq.data(), q_dim);
        add(k, l.bk.data(), kv_dim_k);
        add(v, l.bv.data(), kv_dim_v);
      }
      for (int h = 0; h < c.n_head; ++h) {
        float* qh = q + h * hk;
        if (c.has_qk_norm) rms_norm(qh, qh, l.q_norm.data(), hk, c.rms_eps);
        rope.apply(qh, pos);
        if (query_scale_ != 1.0f)
          for (int i = 0; i < hk; ++i) qh[i] *= query_scale_;
      }
      for (int h = 0; own_kv && h < n_kv; ++h) {
        float* kh = k + h * hk;
        float* vh = v + h * hv;
        if (c.has_qk_norm) rms_norm(kh, kh, l.k_norm.data(), hk, c.rms_eps);
        if (c.is_gemma4()) rms_norm(vh, vh, nullptr, hv, c.rms_eps);
        rope.apply(kh, pos);
        quantize_row(TensorType::F16, kh, kv.key(layer, h, pos), hk);
        quantize_row(TensorType::F16, vh, kv.value(layer, h, pos), hv);
      }
    }
  for (const Segment& s : segments)
    attend(layer, s.n, s.n_past, *s.kv, pool, &q_[static_cast<size_t>(s.row) * q_dim],
           &attn_out_[static_cast<size_t>(s.row) * c.n_head * hv], l.attn_sinks);
  if (c.is_hybrid()) {
    for (int t = 0; t < n; ++t)
      for (int h = 0; h < c.n_head; ++h) {
        const float* gate = &attn_gate_[(static_cast<size_t>(t) * c.n_head + h) * 2 * hv + hv];
        float* out = &attn_out_[(static_cast<size_t>(t) * c.n_head + h) * hv];
        for (int i = 0; i < hv; ++i) out[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
      }
  }
}

// DeepSeek's multi-head latent attention, in the absorbed form. A token
// caches c = norm(Wkv_a x)[:latent] and k_r = RoPE(Wkv_a x)[latent:]. Head
// h's key and value are never formed: its score is
//   q_h . [Wk_b_h c | k_r] = [Wk_b_h^T q_nope_h | q_rope_h] . [c | k_r],
// so the query is carried into the latent's space (attn_k_b holds Wk_b_h^T)
// and meets the cached rows as they are; its output is
//   sum_p w_p Wv_b_h c_p = Wv_b_h (sum_p w_p c_p),
// the attention-weighted latent, taken out of it by attn_v_b once per
// token. All heads share the one cached row, as in grouped attention with
// a single KV head.
void Model::latent_attention(const LayerWeights& l, int layer, int n, std::span<const Segment> segments,
                             ThreadPool& pool) {
  const ModelConfig& c = config_;
  const Mla& m = c.mla;
  const int d = c.n_embd, heads = c.n_head, latent = m.kv_lora_rank, row = c.head_dim_k, hq = c.head_dim_q();

  // Queries: q = Wq_b norm(Wq_a x) (or Wq x), per head [no-RoPE | RoPE].
  q_.resize(static_cast<size_t>(n) * c.q_dim());
  if (m.q_lora_rank > 0) {
    q_a_.resize(static_cast<size_t>(n) * m.q_lora_rank);
    matmul_.run(pool, l.wq_a, xb_.data(), n, d, q_a_.data(), m.q_lora_rank);
    for (int t = 0; t < n; ++t) {
      float* qa = &q_a_[static_cast<size_t>(t) * m.q_lora_rank];
      rms_norm(qa, qa, l.q_a_norm.data(), m.q_lora_rank, c.rms_eps);
    }
    matmul_.run(pool, l.wq_b, q_a_.data(), n, m.q_lora_rank, q_.data(), c.q_dim());
  } else {
    matmul_.run(pool, l.wq, xb_.data(), n, d, q_.data(), c.q_dim());
  }

  // The cached row: [norm(latent) | RoPE(shared key)].
  k_.resize(static_cast<size_t>(n) * row);
  matmul_.run(pool, l.wkv_a, xb_.data(), n, d, k_.data(), row);
  for (const Segment& s : segments)
    for (int t = s.row; t < s.row + s.n; ++t) {
      float* kr = &k_[static_cast<size_t>(t) * row];
      rms_norm(kr, kr, l.kv_a_norm.data(), latent, c.rms_eps);
      rope_.apply(kr + latent, s.n_past + t - s.row);
      quantize_row(TensorType::F16, kr, s.kv->key(layer, 0, s.n_past + t - s.row), row);
    }

  // Absorbed queries: per head [Wk_b_h^T q_nope | RoPE(q_rope)], times the
  // position's temperature where the model has one.
  q_latent_.resize(static_cast<size_t>(n) * heads * row);
  for (int h = 0; h < heads; ++h)
    matmul_.run(pool, l.wk_b.slice(h), &q_[h * hq], n, c.q_dim(), &q_latent_[h * row], int64_t{heads} * row);
  for (const Segment& s : segments)
    for (int t = s.row; t < s.row + s.n; ++t) {
      const int pos = s.n_past + t - s.row;
      for (int h = 0; h < heads; ++h) {
        float* q_rope = &q_[static_cast<size_t>(t) * c.q_dim() + h * hq + m.head_dim_nope];
        rope_.apply(q_rope, pos);
        std::copy_n(q_rope, c.rope_dims, &q_latent_[(static_cast<size_t>(t) * heads + h) * row + latent]);
      }
      if (c.attn_temp_scale != 0) {
        const float temperature = static_cast<float>(
            std::log(std::floor(static_cast<double>(pos) / c.attn_temp_length) + 1.0) * c.attn_temp_scale + 1.0);
        float* q = &q_latent_[static_cast<size_t>(t) * heads * row];
        for (int i = 0; i < heads * row; ++i) q[i] *= temperature;
      }
    }

  // Attention over the cached rows gives each head a weighted latent; Wv_b
  // takes its value out.
  latent_out_.resize(static_cast<size_t>(n) * heads * latent);
  for (const Segment& s : segments)
    attend(layer, s.n, s.n_past, *s.kv, pool, &q_latent_[static_cast<size_t>(s.row) * heads * row],
           &latent_out_[static_cast<size_t>(s.row) * heads * latent]);
  for (int h = 0; h < heads; ++h)
    matmul_.run(pool, l.wv_b.slice(h), &latent_out_[h * latent], n, int64_t{heads} * latent,
                &attn_out_[h * m.head_dim_v], int64_t{heads} * m.head_dim_v);
}

// softmax(scale * q.k) over positions 0..n_past+t, times the values: for
// token t and head h, reads queries[(t * n_head + h) * head_dim_k] and
// writes out[(t * n_head + h) * dim_v].
//
// Flash attention's order: the cache is walked one tile of positions at a
// time, each token keeps the running max and sum of its softmax
// (softmax_step), and its output is rescaled when the max grows and
// divided by the sum at the end. Keys and values are read once per block of
// queries, the scores never outgrow a tile, and nothing grows with the
// depth but the walk. Tiles start at multiples of the tile size whatever the
// batch, so a token's output has the same bits decoded alone or prefilled
// in any chunk. In a sliding-window layer a token at position p meets only
// positions p - window + 1 .. p: the tiles wholly before that are skipped,
// and in the tile where its window begins the positions before get weight 0
// (in a ring their rows may hold later positions: finite, weighed by 0).
// sinks (gpt-oss): one logit per query head, added to the softmax's sum at
// the end; empty for none.
void Model::attend(int layer, int n, int n_past, KvCache& kv, ThreadPool& pool, float* queries, float* out,
                   std::span<const float> sinks) {
  const ModelConfig& c = config_;
  const KvCache::LayerShape& shape = kv.shape(layer);
  const int group = c.n_head / shape.n_head_kv;  // query heads sharing one KV head
  const int n_pos = n_past + n;
  const int dim_k = shape.dim_k, dim_v = c.is_mla() ? c.mla.kv_lora_rank : shape.dim_v;
  const int value_stride = kv.value_stride(layer);
  const float scale = attn_scale_;
  const int window = c.sliding.is_local(layer) ? c.sliding.window : 0;
  // The first position token t sees.
  auto first_seen = [&](int t) { return window > 0 ? std::max(0, n_past + t - window + 1) : 0; };
  // One task per KV head and block of its query heads (MLA's one KV head
  // has them all). A task's heads meet each cache row together (ops.h), and
  // every token of the batch meets a tile of rows while it is in L1.
  const int heads_per_task = std::min(group, kAttentionHeadsPerTask);
  const int blocks_per_kv_head = (group + heads_per_task - 1) / heads_per_task;
  const int row_halves = std::max(dim_k, value_stride);
  const int tile = attention_tile(row_halves);
  const size_t tile_stride = (tile + kLineFloats - 1) / kLineFloats * kLineFloats;
  auto query = [&](int t, int h) { return &queries[(static_cast<size_t>(t) * c.n_head + h) * dim_k]; };
  auto output = [&](int t, int h) { return &out[(static_cast<size_t>(t) * c.n_head + h) * dim_v]; };

  // The query and the attention weights are rounded to float16, as llama.cpp
  // does when it multiplies them with its float16 cache. The rounding is tiny,
  // but attention amplifies it: without it our logits differ from llama.cpp's
  // by ~0.03 rms on quantized models, with it by ~0.0001.
  pool.parallel_for(shape.n_head_kv * blocks_per_kv_head, [&](int64_t begin, int64_t end) {
    // Per pool thread, kept across calls: a tile's scores per (query, query
    // head of the task) of a block, each row starting on a cache line; and
    // the running max and sum of each.
    thread_local std::vector<float> scores_storage, running;
    const int block = std::min(n, kAttentionQueries);
    float* const scores = line_aligned(scores_storage, static_cast<size_t>(block) * heads_per_task * tile_stride);
    running.resize(2 * static_cast<size_t>(block) * heads_per_task);
    for (int task = static_cast<int>(begin); task < end; ++task) {
      const int kv_head = task / blocks_per_kv_head;
      const int first = kv_head * group + task % blocks_per_kv_head * heads_per_task;
      const int heads = std::min(heads_per_task, (kv_head + 1) * group - first);
      for (int t0 = 0; t0 < n; t0 += block) {
        const int t1 = std::min(n, t0 + block);
        auto slot = [&](int t, int g) { return static_cast<size_t>(t - t0) * heads + g; };
        auto row_scores = [&](int t, int g) { return scores + slot(t, g) * tile_stride; };
        float* const max = running.data();
        float* const sum = running.data() + static_cast<size_t>(block) * heads_per_task;
        for (int t = t0; t < t1; ++t)
          for (int g = 0; g < heads; ++g) {
            round_to_f16(query(t, first + g), dim_k);
            std::fill_n(output(t, first + g), dim_v, 0.0f);
            sum[slot(t, g)] = 0.0f;
          }
        // Token t attends to positions first_seen(t)..n_past+t (causal): the
        // tiles from the one holding first_seen(t0) up to there, the last one
        // cut short; a token whose window starts past a tile skips it.
        for (int p0 = first_seen(t0) / tile * tile; p0 < n_past + t1; p0 += tile) {
          const int t_first = std::max(t0, p0 - n_past);
          const int t_last = window > 0 ? std::min(t1, p0 + tile + window - 1 - n_past) : t1;
          auto count = [&](int t) { return std::min(tile, n_past + t + 1 - p0); };
          // A tile's rows are contiguous, in a ring too (its rows are whole
          // tiles); the kernels may ask for the rows after it, to the
          // walk's or the ring's end.
          const uint16_t* keys = kv.key(layer, kv_head, p0);
          const uint16_t* values = kv.value(layer, kv_head, p0);
          const int ahead = shape.ring ? std::min(n_pos - p0, shape.rows - p0 % shape.rows) : n_pos - p0;
          for (int t = t_first; t < t_last; ++t)
            attention_scores(query(t, first), dim_k, heads, keys, count(t), ahead, dim_k, scale, row_scores(t, 0),
                             tile_stride);
          for (int t = t_first; t < t_last; ++t) {
            const int hidden = std::max(0, first_seen(t) - p0);  // positions before the window
            for (int g = 0; g < heads; ++g) {
              float* row = row_scores(t, g);
              const float shrink = softmax_step(row + hidden, count(t) - hidden, max[slot(t, g)], sum[slot(t, g)]);
              std::fill_n(row, hidden, 0.0f);
              if (shrink != 1.0f)
                for (float* o = output(t, first + g); o != output(t, first + g) + dim_v; ++o) *o *= shrink;
              round_to_f16(row, count(t));
            }
          }
          for (int t = t_first; t < t_last; ++t)
            add_weighted_values(row_scores(t, 0), tile_stride, heads, values, count(t), ahead, dim_v, value_stride,
                                output(t, first), dim_v);
        }
        for (int t = t0; t < t1; ++t)
          for (int g = 0; g < heads; ++g) {
            float inv = 1.0f / sum[slot(t, g)];
            if (!sinks.empty()) {
              // The sink is one more term of the sum, e^(sink - max'), with
              // no value: the output only shrinks.
              const float sink = sinks[first + g], old_max = max[slot(t, g)];
              const float new_max = std::max(old_max, sink);
              const float shrink = std::exp(old_max - new_max);
              inv = shrink / (sum[slot(t, g)] * shrink + std::exp(sink - new_max));
            }
            for (float* o = output(t, first + g); o != output(t, first + g) + dim_v; ++o) *o *= inv;
          }
      }
    }
  });
}

}  // namespace revis
