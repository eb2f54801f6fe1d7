// DeepSeek V4's forward pass (config.h's Deepseek4), as llama.cpp computes
// it. Read deepseek4_blocks() top to bottom: the embedding becomes n_hc
// copies of the residual stream; each block reads a mix of the copies,
// attends, writes back, reads again, runs its experts, writes back; a last
// mix of the copies goes to the output norm (model.cpp). A chunk's rows may
// belong to several sequences: the matrices take them together, and each
// row writes and reads its own sequence's cache at its own position.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/hyper_connections.h"
#include "model/model.h"
#include "model/ops.h"
#include "quant/quant.h"

namespace revis {
namespace {

float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

float silu(float x) { return x / (1.0f + std::exp(-x)); }

// llama.cpp keeps the indexer's keys rotated by an orthonormal
// Walsh-Hadamard matrix (of the largest power of two from 64 that divides
// the width, one block at a time), and the attention's too where the head
// is as wide as the indexer's; queries are rotated alike, so every score is
// the same but for the float16 rounding of the cached keys, which happens
// in the rotated basis. Rotating as it does makes those roundings ours:
// near-ties of the indexer's choice then fall the same way. The rotation
// is its own inverse. Widths that are no multiple of 64 are not rotated.
void hadamard_rotate(float* x, int n) {
  if (n % 64 != 0) return;
  int block = 64;
  while (n % (2 * block) == 0) block *= 2;
  const float scale = 1.0f / std::sqrt(static_cast<float>(block));
  for (float* b = x; b != x + n; b += block) {
    for (int half = 1; half < block; half *= 2)
      for (int i = 0; i < block; i += 2 * half)
        for (int j = i; j < i + half; ++j) {
          const float u = b[j], v = b[j + half];
          b[j] = u + v;
          b[j + half] = u - v;
        }
    for (int i = 0; i < block; ++i) b[i] *= scale;
  }
}

// Whether the attention's keys are rotated (above): llama.cpp rotates the
// caches whose head is as wide as the indexer's key.
bool rotates_attention(const ModelConfig& c) { return c.head_dim_k == c.ds4.indexer_dim; }

// scores[h * scores_stride + e - first] = q_h . key e, for heads h of q
// (dim floats apart) and compressed keys e in [first, last): in one call
// where the cache's rows lie dim halves apart, else a row at a time (a
// key's score has the same bits either way, ops.h).
void compressed_scores(CompressorCache& cache, int layer, CompressorCache::Which which, const float* q, int heads,
                       int dim, int first, int last, float* scores, size_t scores_stride) {
  if (last - first > 1 && cache.key(layer, which, first + 1) - cache.key(layer, which, first) == dim) {
    attention_scores(q, dim, heads, cache.key(layer, which, first), last - first, last - first, dim, 1.0f, scores,
                     scores_stride);
    return;
  }
  for (int e = first; e < last; ++e)
    attention_scores(q, dim, heads, cache.key(layer, which, e), 1, 1, dim, 1.0f, scores + (e - first), scores_stride);
}

}  // namespace

void Model::place_rows(std::span<const Segment> segments) {
  places_.clear();
  for (const Segment& s : segments)  // they cover the chunk's rows in order
    for (int t = 0; t < s.n; ++t) places_.push_back({s.kv, s.n_past + t});
}

void Model::deepseek4_blocks(const int32_t* tokens, int n, std::span<const Segment> segments, ThreadPool& pool) {
  const ModelConfig& c = config_;
  place_rows(segments);
  const int d = c.n_embd, n_hc = c.ds4.n_hc;
  // Every copy starts as the token's embedding.
  copies_.resize(static_cast<size_t>(n) * n_hc * d);
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < n_hc; ++h) std::copy_n(&x_[t * d], d, &copies_[(static_cast<size_t>(t) * n_hc + h) * d]);

  for (int layer = 0; layer < c.n_layer; ++layer)
    deepseek4_block(weights_.ds4_layers[layer], layer, layer, tokens, n, pool);

  read_copies(weights_.hc_head, /*head=*/true, n, pool);
  std::copy_n(xb_.data(), static_cast<size_t>(n) * d, x_.data());
}

// The copies += attention(norm(read)), then += experts(norm(read)), each
// through the hyper-connections' write. `block` is the file's block (its
// compression ratio and clamps), kv_layer the cache's layer for its rows.
void Model::deepseek4_block(const Deepseek4Layer& l, int block, int kv_layer, const int32_t* tokens, int n,
                            ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd;
  read_copies(l.hc_attn, false, n, pool);
  for (int t = 0; t < n; ++t) rms_norm(&xb_[t * d], &xb_[t * d], l.attn_norm.data(), d, c.rms_eps);
  deepseek4_attention(l, c.ds4.compress_ratios[block], kv_layer, n, pool);
  write_copies(n);

  read_copies(l.hc_ffn, false, n, pool);
  for (int t = 0; t < n; ++t) rms_norm(&xb_[t * d], &xb_[t * d], l.ffn_norm.data(), d, c.rms_eps);
  deepseek4_moe(l, block, tokens, n, pool);
  write_copies(n);
}

// The multi-token-prediction block (nextn.cpp) over n tokens: each of a
// token's n_hc hidden copies, normed by hnorm, goes through eh_proj beside
// the token's embedding normed by enorm ([e ; h]); the block then runs on
// those copies, keeping its rows in layer 0 of kv.
void Model::deepseek4_nextn_chunk(const int32_t* tokens, const float* hidden, int n, int n_past, KvCache& kv,
                                  ThreadPool& pool) {
  const ModelConfig& c = config_;
  const NextnWeights& w = weights_.nextn.front();
  const int d = c.n_embd, n_hc = c.ds4.n_hc, rows = n * n_hc;
  x_.resize(static_cast<size_t>(n) * d);
  xb_.resize(static_cast<size_t>(n) * d);
  nextn_in_.resize(static_cast<size_t>(rows) * 2 * d);
  copies_.resize(static_cast<size_t>(rows) * d);
  for (int t = 0; t < n; ++t) {
    float* embedding = &xb_[static_cast<size_t>(t) * d];
    dequantize_row(w.embed.type, w.embed.row(tokens[t]), embedding, d);
    rms_norm(embedding, embedding, w.enorm.data(), d, c.rms_eps);
    for (int h = 0; h < n_hc; ++h) {
      const size_t row = static_cast<size_t>(t) * n_hc + h;
      std::copy_n(embedding, d, &nextn_in_[row * 2 * d]);
      rms_norm(&nextn_in_[row * 2 * d + d], &hidden[row * d], w.hnorm.data(), d, c.rms_eps);
    }
  }
  matmul_.run(pool, w.eh_proj, nextn_in_.data(), rows, 2 * d, copies_.data(), d);
  const Segment whole{&kv, n_past, 0, n};
  place_rows({&whole, 1});
  deepseek4_block(weights_.ds4_layers[c.n_layer], c.n_layer, 0, tokens, n, pool);
}

// xb_ = each token's read of its copies; the write and carry weights stay
// in mix_post_ and mix_comb_ for write_copies. The output head has read
// weights only.
void Model::read_copies(const HyperMix& m, bool head, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd, n_hc = c.ds4.n_hc, width = n_hc * d, n_mix = static_cast<int>(m.fn.rows);
  copies_normed_.resize(static_cast<size_t>(n) * width);
  for (int t = 0; t < n; ++t)
    rms_normalise(&copies_normed_[static_cast<size_t>(t) * width], &copies_[static_cast<size_t>(t) * width], width,
                  c.rms_eps);
  mix_logits_.resize(static_cast<size_t>(n) * n_mix);
  matmul_.run(pool, m.fn, copies_normed_.data(), n, width, mix_logits_.data(), n_mix);
  mix_pre_.resize(static_cast<size_t>(n) * n_hc);
  mix_post_.resize(static_cast<size_t>(n) * n_hc);
  mix_comb_.resize(static_cast<size_t>(n) * n_hc * n_hc);
  for (int t = 0; t < n; ++t) {
    const float* logits = &mix_logits_[static_cast<size_t>(t) * n_mix];
    if (head)
      hyper_head_weights(logits, m, n_hc, c.ds4.hc_eps, &mix_pre_[t * n_hc]);
    else
      hyper_weights(logits, m, n_hc, c.ds4.hc_eps, c.ds4.sinkhorn_iterations, &mix_pre_[t * n_hc],
                    &mix_post_[t * n_hc], &mix_comb_[t * n_hc * n_hc]);
    hyper_read(&copies_[static_cast<size_t>(t) * width], &mix_pre_[t * n_hc], n_hc, d, &xb_[t * d]);
  }
}

// copies = post * xb_ + comb copies, per token.
void Model::write_copies(int n) {
  const int d = config_.n_embd, n_hc = config_.ds4.n_hc, width = n_hc * d;
  std::vector<float>& carried = copies_normed_;  // free until the next read
  std::copy_n(copies_.data(), static_cast<size_t>(n) * width, carried.data());
  for (int t = 0; t < n; ++t)
    hyper_write(&xb_[t * d], &carried[static_cast<size_t>(t) * width], &mix_post_[t * n_hc],
                &mix_comb_[t * n_hc * n_hc], n_hc, d, &copies_[static_cast<size_t>(t) * width]);
}

// Queries q = per-head norm(Wq_b norm(Wq_a x)), one shared key-value row
// kv = norm(Wkv x), both RoPE'd on their last rope_dims. Each token attends
// to the raw rows of the sliding window and, in compressing blocks, to
// compressed keys; the output is rotated back (the values carried the
// keys' rotation), then projected per group of heads (Wo_a) and out (Wo_b).
void Model::deepseek4_attention(const Deepseek4Layer& l, int ratio, int layer, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const Deepseek4& ds = c.ds4;
  const int d = c.n_embd, heads = c.n_head, head = c.head_dim_k, nope = head - c.rope_dims, rank = ds.q_lora_rank;
  const Rope& rope = ratio == 0 ? rope_ : compressed_rope_;

  q_a_.resize(static_cast<size_t>(n) * rank);
  matmul_.run(pool, l.wq_a, xb_.data(), n, d, q_a_.data(), rank);
  for (int t = 0; t < n; ++t) rms_norm(&q_a_[t * rank], &q_a_[t * rank], l.q_a_norm.data(), rank, c.rms_eps);
  q_.resize(static_cast<size_t>(n) * heads * head);
  matmul_.run(pool, l.wq_b, q_a_.data(), n, rank, q_.data(), heads * head);
  k_.resize(static_cast<size_t>(n) * head);
  matmul_.run(pool, l.wkv, xb_.data(), n, d, k_.data(), head);
  for (int t = 0; t < n; ++t) {
    const RowPlace at = places_[t];
    for (int h = 0; h < heads; ++h) {
      float* qh = &q_[(static_cast<size_t>(t) * heads + h) * head];
      rms_normalise(qh, qh, head, c.rms_eps);
      rope.apply(qh + nope, at.pos);
    }
    float* k = &k_[static_cast<size_t>(t) * head];
    rms_norm(k, k, l.kv_norm.data(), head, c.rms_eps);
    rope.apply(k + nope, at.pos);
    if (rotates_attention(c)) hadamard_rotate(k, head);
    quantize_row(TensorType::F16, k, at.kv->key(layer, 0, at.pos), head);
  }

  if (ratio != 0) {
    compress(l.compressor, layer, CompressorCache::kAttention, n, pool);
    if (ratio == 4) compress(l.indexer_compressor, layer, CompressorCache::kIndexer, n, pool);
    for (int t = 0; t < n; ++t) places_[t].kv->compressor()->wrote(places_[t].pos);
  }
  select_compressed(l, ratio, layer, n, pool);
  sparse_attention(l, ratio, layer, n, pool);

  const int groups = ds.out_groups, group_width = heads * head / groups;
  out_a_.resize(static_cast<size_t>(n) * groups * ds.out_rank);
  for (int g = 0; g < groups; ++g)
    matmul_.run(pool, l.wo_a.slice(g), &attn_out_[g * group_width], n, heads * head, &out_a_[g * ds.out_rank],
                groups * ds.out_rank);
  matmul_.run(pool, l.wo_b, out_a_.data(), n, groups * ds.out_rank, xb_.data(), d);
}

// Each position's key parts kv = Wkv x and scores Wgate x + ape[pos % ratio]
// go to the compressor's state rows; a position that closes a group of
// `ratio` also makes the group's compressed key: per value i, the softmax
// over the group's scores weighs its key parts, then norm and RoPE at the
// group's first position. Ratio 4 reads the group before too (the first
// half of its rows; the group's own rows give the second half), none
// before the first group. Positions go in order, each group made as soon
// as its last row is in: the cache keeps only the rows of open groups.
void Model::compress(const Compressor& comp, int layer, CompressorCache::Which which, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd, r = comp.ratio, width = static_cast<int>(comp.wkv.rows);
  const int dim = static_cast<int>(comp.norm.size()), nope = dim - c.rope_dims;
  const bool overlap = width == 2 * dim;
  comp_kv_.resize(static_cast<size_t>(n) * width);
  comp_score_.resize(static_cast<size_t>(n) * width);
  matmul_.run(pool, comp.wkv, xb_.data(), n, d, comp_kv_.data(), width);
  matmul_.run(pool, comp.wgate, xb_.data(), n, d, comp_score_.data(), width);
  std::vector<float> parts(2 * r), scores(2 * r), key(dim);
  for (int t = 0; t < n; ++t) {
    const int pos = places_[t].pos;
    CompressorCache& cache = *places_[t].kv->compressor();
    float* score = &comp_score_[static_cast<size_t>(t) * width];
    add(score, &comp.ape[static_cast<size_t>(pos % r) * width], width);
    std::copy_n(&comp_kv_[static_cast<size_t>(t) * width], width, cache.state_parts(layer, which, pos));
    std::copy_n(score, width, cache.state_scores(layer, which, pos));
    if ((pos + 1) % r != 0) continue;
    const int start = pos + 1 - r;  // the group's rows: this row's sequence, written above or before
    for (int i = 0; i < dim; ++i) {
      int m = 0;
      if (overlap)
        for (int j = start - r; j < start; ++j, ++m) {
          parts[m] = j < 0 ? 0.0f : cache.state_parts(layer, which, j)[i];
          scores[m] = j < 0 ? -INFINITY : cache.state_scores(layer, which, j)[i];
        }
      const int own = overlap ? dim + i : i;
      for (int j = start; j <= pos; ++j, ++m) {
        parts[m] = cache.state_parts(layer, which, j)[own];
        scores[m] = cache.state_scores(layer, which, j)[own];
      }
      softmax(scores.data(), m);
      double sum = 0;
      for (int j = 0; j < m; ++j) sum += static_cast<double>(parts[j] * scores[j]);
      key[i] = static_cast<float>(sum);
    }
    rms_norm(key.data(), key.data(), comp.norm.data(), dim, c.rms_eps);
    compressed_rope_.apply(key.data() + nope, start);
    if (which == CompressorCache::kIndexer || rotates_attention(c)) hadamard_rotate(key.data(), dim);
    quantize_row(TensorType::F16, key.data(), cache.key(layer, which, pos / r), dim);
    cache.closed_group(layer, which, pos);
  }
}

// picked_[t]: the compressed keys token t reads. All those its position
// has closed (ratio 128); for ratio 4 the indexer's top_k of them by
//   score(e) = sum over indexer heads h of w_h relu(q_h . key_e),
// with q_h from the query's bottleneck (RoPE'd as the compressed keys) and
// w_h from the block's input, or all of them where they are no more.
void Model::select_compressed(const Deepseek4Layer& l, int ratio, int layer, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const Deepseek4& ds = c.ds4;
  picked_.resize(n);
  for (int t = 0; t < n; ++t) {
    picked_[t].resize(ratio == 0 ? 0 : (places_[t].pos + 1) / ratio);
    std::iota(picked_[t].begin(), picked_[t].end(), 0);
  }
  if (ratio != 4) return;
  const int ih = ds.indexer_heads, idim = ds.indexer_dim, nope = idim - c.rope_dims, rank = ds.q_lora_rank;
  bool any = false;
  for (int t = 0; t < n; ++t) any = any || static_cast<int>(picked_[t].size()) > ds.indexer_top_k;
  if (!any) return;
  index_q_.resize(static_cast<size_t>(n) * ih * idim);
  matmul_.run(pool, l.indexer_q_b, q_a_.data(), n, rank, index_q_.data(), ih * idim);
  index_w_.resize(static_cast<size_t>(n) * ih);
  matmul_.run(pool, l.indexer_proj, xb_.data(), n, c.n_embd, index_w_.data(), ih);
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(idim * ih));
  // A token at a time, its keys split among the threads: a decoding step
  // has one token and thousands of keys.
  std::vector<float> score;
  for (int t = 0; t < n; ++t) {
    std::vector<int>& picks = picked_[t];
    const int visible = static_cast<int>(picks.size());
    if (visible <= ds.indexer_top_k) continue;
    float* q = &index_q_[static_cast<size_t>(t) * ih * idim];
    CompressorCache& cache = *places_[t].kv->compressor();
    for (int h = 0; h < ih; ++h) {
      compressed_rope_.apply(q + h * idim + nope, places_[t].pos);
      hadamard_rotate(q + h * idim, idim);
    }
    index_scores_.resize(static_cast<size_t>(ih) * visible);
    score.assign(visible, 0.0f);
    pool.parallel_for(visible, [&](int64_t begin, int64_t end) {
      compressed_scores(cache, layer, CompressorCache::kIndexer, q, ih, idim, static_cast<int>(begin),
                        static_cast<int>(end), &index_scores_[begin], visible);
      for (int64_t e = begin; e < end; ++e)
        for (int h = 0; h < ih; ++h)
          score[e] += std::max(0.0f, index_scores_[h * static_cast<size_t>(visible) + e]) * (index_w_[t * ih + h] * w_scale);
    });
    // Ties are common (relu leaves many keys at 0): they fall as
    // llama.cpp's top-k lets them, std::partial_sort with this order
    // over the keys in position order.
    std::partial_sort(picks.begin(), picks.begin() + ds.indexer_top_k, picks.end(),
                      [&](int a, int b) { return score[a] > score[b]; });
    picks.resize(ds.indexer_top_k);
  }
}

// Per token and head: softmax(scale q.k) over the window's raw rows and the
// picked compressed keys, with the head's sink as one more logit that
// carries no value; the output is the weighted keys, rotated back. The
// query and the weights are rounded to float16 as llama.cpp's products with
// its float16 cache round them.
void Model::sparse_attention(const Deepseek4Layer& l, int ratio, int layer, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int heads = c.n_head, head = c.head_dim_k, nope = head - c.rope_dims;
  const Rope& rope = ratio == 0 ? rope_ : compressed_rope_;
  attn_out_.resize(static_cast<size_t>(n) * heads * head);
  // Work items of a token and a group of its heads: all of them where the
  // chunk has tokens enough for every thread, else groups of kGroup so that
  // a decoding step's heads spread over the threads. Each item gathers the
  // token's keys; a head's bits do not depend on its group (ops.h).
  constexpr int kGroup = 8;
  const int group = n >= 2 * pool.size() ? heads : std::min(heads, kGroup);
  const int groups = (heads + group - 1) / group;
  pool.parallel_for(static_cast<int64_t>(n) * groups, [&](int64_t begin, int64_t end) {
    std::vector<uint16_t> keys;
    std::vector<float> weights;
    for (int64_t item = begin; item < end; ++item) {
      const int t = static_cast<int>(item / groups), h0 = static_cast<int>(item % groups) * group;
      const int count = std::min(group, heads - h0);
      const int pos = places_[t].pos;
      KvCache& kv = *places_[t].kv;
      const int first = std::max(0, pos - c.ds4.n_swa + 1);
      const int n_raw = pos + 1 - first, n_keys = n_raw + static_cast<int>(picked_[t].size());
      // The window's raw rows, then the picked compressed keys, as float16
      // rows one after another.
      keys.resize(static_cast<size_t>(n_keys) * head);
      std::copy_n(kv.key(layer, 0, first), static_cast<size_t>(n_raw) * head, keys.data());
      for (size_t e = 0; e < picked_[t].size(); ++e)
        std::copy_n(kv.compressor()->key(layer, CompressorCache::kAttention, picked_[t][e]), head,
                    &keys[(n_raw + e) * head]);
      float* q = &q_[(static_cast<size_t>(t) * heads + h0) * head];
      for (int h = 0; h < count; ++h) {
        if (rotates_attention(c)) hadamard_rotate(q + h * head, head);
        round_to_f16(q + h * head, head);
      }
      // Per head: the keys' logits and the sink's, softmax, weights
      // rounded as llama.cpp's float16 products round them.
      const size_t stride = static_cast<size_t>(n_keys) + 1;
      weights.resize(count * stride);
      attention_scores(q, head, count, keys.data(), n_keys, n_keys, head, attn_scale_, weights.data(), stride);
      for (int h = 0; h < count; ++h) {
        float* w = &weights[h * stride];
        w[n_keys] = l.sinks[h0 + h];
        softmax(w, n_keys + 1);
        round_to_f16(w, n_keys);
      }
      float* out = &attn_out_[(static_cast<size_t>(t) * heads + h0) * head];
      std::fill_n(out, static_cast<size_t>(count) * head, 0.0f);
      add_weighted_values(weights.data(), stride, count, keys.data(), n_keys, n_keys, head, head, out, head);
      for (int h = 0; h < count; ++h) {
        if (rotates_attention(c)) hadamard_rotate(out + h * head, head);
        rope.unapply(out + h * head + nope, pos);
      }
    }
  });
}

// Routed experts and the shared ones. Each expert scores sqrt(softplus(
// router logit)); hash-routed blocks take the token's experts from their
// table, the others the top k of score + bias. The chosen scores,
// normalised and scaled, weigh the experts' outputs. SwiGLU clamps the
// gate from above and the up projection both ways.
void Model::deepseek4_moe(const Deepseek4Layer& l, int block, const int32_t* tokens, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd, n_exp = c.n_expert, k = c.n_expert_used;
  std::vector<float> probs(static_cast<size_t>(n) * n_exp), choice(n_exp);
  matmul_.run(pool, l.router, xb_.data(), n, d, probs.data(), n_exp);
  routed_.assign(n_exp, {});
  std::vector<int> order(n_exp);
  for (int t = 0; t < n; ++t) {
    float* p = &probs[static_cast<size_t>(t) * n_exp];
    for (int e = 0; e < n_exp; ++e) p[e] = std::sqrt(softplus(p[e]));
    if (!l.token_experts.empty()) {
      std::copy_n(&l.token_experts[static_cast<size_t>(tokens[t]) * k], k, order.begin());
    } else {
      for (int e = 0; e < n_exp; ++e) choice[e] = p[e] + l.expert_bias[e];
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
        return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
      });
    }
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += p[order[j]];
    sum = std::max(sum, 6.103515625e-5f);  // llama.cpp's floor: float16's smallest normal
    for (int j = 0; j < k; ++j) {
      const float w = c.expert_weights_norm ? p[order[j]] / sum : p[order[j]];
      routed_[order[j]].push_back({t, w * c.expert_weights_scale});
    }
  }

  moe_out_.assign(static_cast<size_t>(n) * d, 0.0f);
  for (int e = 0; e < n_exp; ++e) {
    const auto& batch = routed_[e];
    if (batch.empty()) continue;
    const int m = static_cast<int>(batch.size());
    moe_in_.resize(static_cast<size_t>(m) * d);
    for (int i = 0; i < m; ++i) std::copy_n(&xb_[batch[i].first * d], d, &moe_in_[i * d]);
    clamped_swiglu_ffn(l.gate_exps.slice(e), l.up_exps.slice(e), l.down_exps.slice(e), moe_in_.data(), m,
                       moe_in_.data(), c.ds4.clamp_exp[block], pool);
    for (int i = 0; i < m; ++i) axpy(&moe_out_[batch[i].first * d], batch[i].second, &moe_in_[i * d], d);
  }
  if (!l.gate_shexp.empty()) {
    clamped_swiglu_ffn(l.gate_shexp, l.up_shexp, l.down_shexp, xb_.data(), n, xb_.data(), c.ds4.clamp_shexp[block],
                       pool);
    add(moe_out_.data(), xb_.data(), n * d);
  }
  std::copy(moe_out_.begin(), moe_out_.end(), xb_.begin());
}

// out = W_down (silu(min(W_gate x, limit)) * clamp(W_up x, -limit, limit));
// limit 0: no clamp.
void Model::clamped_swiglu_ffn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x, int n,
                               float* out, float limit, ThreadPool& pool) {
  const int d = config_.n_embd, f = static_cast<int>(gate.rows);
  ffn_gate_.resize(static_cast<size_t>(n) * f);
  ffn_up_.resize(static_cast<size_t>(n) * f);
  matmul_.run(pool, gate, x, n, d, ffn_gate_.data(), f);
  matmul_.run(pool, up, x, n, d, ffn_up_.data(), f);
  for (size_t i = 0; i < static_cast<size_t>(n) * f; ++i) {
    float g = ffn_gate_[i], u = ffn_up_[i];
    if (limit > 1e-6f) {
      g = std::min(g, limit);
      u = std::clamp(u, -limit, limit);
    }
    ffn_gate_[i] = silu(g) * u;
  }
  matmul_.run(pool, down, ffn_gate_.data(), n, f, out, d);
}

}  // namespace revis
