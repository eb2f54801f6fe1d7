// The transformer forward pass shared by llama, qwen2, qwen3 and qwen3moe.
// Read forward_chunk() top to bottom: embed, then per layer attention and
// feed-forward with residual connections, then the output projection.
#include "model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>

#include "model/ops.h"
#include "quant/quant.h"

namespace revis {
namespace {

// Prompts are processed in chunks so scratch memory stays bounded (about
// 0.1-0.2 MiB per token for 1-8B models) while each weight row is reused
// across many tokens. The chunk is also how many tokens a matrix product's
// tile of weight rows meets: with 64, AVX2's repacking of Q8_0 tiles
// (matmul.h) cost 6% of the prefill time, and Q8_0 prompts on AVX2 ran at
// about the speed they had before the repacking; with 256, 12-20% faster.
//
// A resumed prompt (engine/session_pool.h) restarts at a multiple of 64
// tokens and must give the bits a cold prefill gives. A dense model's
// tokens meet the kernels four at a time from the chunk's start, so any
// chunk that is a multiple of four gives every token the same grouping.
// A mixture of experts batches each expert's tokens within a chunk, so its
// chunks must start where a resumed prompt may: every 64 tokens.
constexpr int kDenseChunk = 256;
constexpr int kExpertsChunk = 64;

// Attention takes a chunk's queries this many at a time, which bounds its
// scores (queries x query heads per KV head x positions floats per thread:
// 64 x 4 x 8192 x 4 B = 8 MiB at 8192 positions).
constexpr int kAttentionQueries = 64;

// Positions of the cache that attention takes at a time: their keys or
// values (16 KiB of halves) stay in L1 while every token of a batch meets
// them.
constexpr size_t kAttentionChunkBytes = 16 * 1024;

uint64_t matrix_bytes(const Matrix& m) { return m.empty() ? 0 : m.row_bytes * m.rows * m.n_mats; }

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

Result<std::unique_ptr<Model>> Model::load(std::shared_ptr<const gguf::GgufFile> file) {
  std::unique_ptr<Model> model(new Model());
  auto config = read_model_config(*file);
  if (!config.ok()) return config.status().with_context(file->path());
  model->config_ = *config;
  auto weights = load_model_weights(*file, model->config_);
  if (!weights.ok()) return weights.status().with_context(file->path());
  model->weights_ = std::move(*weights);
  model->file_ = std::move(file);

  const ModelConfig& c = model->config_;
  model->rope_theta_scale_ = std::pow(c.rope_base, -2.0f / static_cast<float>(c.rope_dims));
  return model;
}

uint64_t Model::bytes_per_token() const {
  const ModelConfig& c = config_;
  uint64_t total = matrix_bytes(weights_.output) + weights_.token_embd.row_bytes;
  for (const LayerWeights& l : weights_.layers) {
    total += matrix_bytes(l.wq) + matrix_bytes(l.wk) + matrix_bytes(l.wv) + matrix_bytes(l.wo);
    total += matrix_bytes(l.w_gate) + matrix_bytes(l.w_up) + matrix_bytes(l.w_down) + matrix_bytes(l.router);
    if (c.n_expert > 0) {
      const uint64_t experts = matrix_bytes(l.gate_exps) + matrix_bytes(l.up_exps) + matrix_bytes(l.down_exps);
      total += experts / c.n_expert * c.n_expert_used;
    }
  }
  return total;
}

Status Model::forward(std::span<const int32_t> tokens, int n_past, KvCache& kv, ThreadPool& pool, bool all_logits,
                      std::vector<float>& logits) {
  const int n = static_cast<int>(tokens.size());
  if (n == 0) return Status::error("forward: no tokens to evaluate");
  if (n_past < 0 || n_past + n > kv.n_ctx())
    return Status::error("context full: " + std::to_string(n_past + n) + " tokens do not fit in a context of " +
                         std::to_string(kv.n_ctx()) + " (raise -c)");
  for (int32_t t : tokens)
    if (t < 0 || t >= config_.n_vocab)
      return Status::error("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                           std::to_string(config_.n_vocab - 1) + ")");
  const size_t n_vocab = config_.n_vocab;
  logits.assign((all_logits ? n : 1) * n_vocab, 0.0f);
  // A decoding step (one token): how its products prefetch is tuned by
  // timing steps.
  const bool step = n == 1;
  if (step) matmul_.set_prefetch(prefetch_tuner_.mode());
  const auto began = std::chrono::steady_clock::now();
  const int max_chunk = config_.n_expert > 0 ? kExpertsChunk : kDenseChunk;
  for (int start = 0; start < n; start += max_chunk) {
    const int len = std::min(max_chunk, n - start);
    const bool last_chunk = start + len == n;
    if (!all_logits && !last_chunk) {
      forward_chunk(tokens.data() + start, len, n_past + start, kv, pool, false, nullptr);
    } else {
      float* out = all_logits ? logits.data() + start * n_vocab : logits.data();
      forward_chunk(tokens.data() + start, len, n_past + start, kv, pool, all_logits, out);
    }
  }
  if (step) prefetch_tuner_.record(std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  return {};
}

void Model::forward_chunk(const int32_t* tokens, int n, int n_past, KvCache& kv, ThreadPool& pool, bool all_logits,
                          float* logits) {
  const ModelConfig& c = config_;
  const int d = c.n_embd;
  x_.resize(static_cast<size_t>(n) * d);
  xb_.resize(static_cast<size_t>(n) * d);
  q_.resize(static_cast<size_t>(n) * c.q_dim());
  k_.resize(static_cast<size_t>(n) * c.kv_dim_k());
  v_.resize(static_cast<size_t>(n) * c.kv_dim_v());
  attn_out_.resize(static_cast<size_t>(n) * c.n_head * c.head_dim_v);

  // Token embeddings.
  const Matrix& embd = weights_.token_embd;
  for (int t = 0; t < n; ++t) dequantize_row(embd.type, embd.row(tokens[t]), &x_[t * d], d);

  for (int layer = 0; layer < c.n_layer; ++layer) {
    const LayerWeights& l = weights_.layers[layer];

    // Attention block: x += Wo * attention(norm(x)).
    for (int t = 0; t < n; ++t) rms_norm(&xb_[t * d], &x_[t * d], l.attn_norm.data(), d, c.rms_eps);
    matmul_.run(pool, l.wq, xb_.data(), n, d, q_.data(), c.q_dim());
    matmul_.run(pool, l.wk, xb_.data(), n, d, k_.data(), c.kv_dim_k());
    matmul_.run(pool, l.wv, xb_.data(), n, d, v_.data(), c.kv_dim_v());
    for (int t = 0; t < n; ++t) {
      float* q = &q_[t * c.q_dim()];
      float* k = &k_[t * c.kv_dim_k()];
      float* v = &v_[t * c.kv_dim_v()];
      if (c.has_qkv_bias) {
        add(q, l.bq.data(), c.q_dim());
        add(k, l.bk.data(), c.kv_dim_k());
        add(v, l.bv.data(), c.kv_dim_v());
      }
      for (int h = 0; h < c.n_head; ++h) {
        float* qh = q + h * c.head_dim_k;
        if (c.has_qk_norm) rms_norm(qh, qh, l.q_norm.data(), c.head_dim_k, c.rms_eps);
        apply_rope(qh, n_past + t);
      }
      for (int h = 0; h < c.n_head_kv; ++h) {
        float* kh = k + h * c.head_dim_k;
        if (c.has_qk_norm) rms_norm(kh, kh, l.k_norm.data(), c.head_dim_k, c.rms_eps);
        apply_rope(kh, n_past + t);
        quantize_row(TensorType::F16, kh, kv.key(layer, h, n_past + t), c.head_dim_k);
        quantize_row(TensorType::F16, v + h * c.head_dim_v, kv.value(layer, h, n_past + t), c.head_dim_v);
      }
    }
    attention(layer, n, n_past, kv, pool);
    matmul_.run(pool, l.wo, attn_out_.data(), n, c.n_head * c.head_dim_v, xb_.data(), d);
    add(x_.data(), xb_.data(), n * d);

    // Feed-forward block: x += ffn(norm(x)); the result lands in xb_.
    for (int t = 0; t < n; ++t) rms_norm(&xb_[t * d], &x_[t * d], l.ffn_norm.data(), d, c.rms_eps);
    if (c.n_expert > 0)
      feed_forward_moe(l, n, pool);
    else
      feed_forward_dense(l, n, pool);
    add(x_.data(), xb_.data(), n * d);
  }

  // Output: logits = W_out * norm(x), for every token or only the last.
  if (!logits) return;
  const int first = all_logits ? 0 : n - 1;
  const int rows = n - first;
  for (int t = first; t < n; ++t) rms_norm(&xb_[t * d], &x_[t * d], weights_.output_norm.data(), d, c.rms_eps);
  matmul_.run(pool, weights_.output, &xb_[first * d], rows, d, logits, c.n_vocab);
}

void Model::apply_rope(float* head, int pos) const {
  // theta_i = pos * freq_scale * base^(-2i/rope_dims) / factor_i, computed in
  // float by repeated multiplication exactly as llama.cpp does: the keys are
  // rounded to float16 in the cache, and matching its rounding of theta keeps
  // those roundings identical, where a more precise theta would flip a few
  // of them and make the logits drift from the reference by ~0.05 rms.
  const int pairs = config_.rope_dims / 2;
  const std::vector<float>& factors = weights_.rope_freq_factors;
  // Adjacent layout rotates (x[2i], x[2i+1]); NeoX rotates (x[i], x[i+pairs]).
  const bool neox = config_.rope_layout == RopeLayout::kNeox;
  float theta_base = static_cast<float>(pos);
  for (int i = 0; i < pairs; ++i) {
    const float theta = config_.rope_freq_scale * (factors.empty() ? theta_base : theta_base / factors[i]);
    const float cos_t = std::cos(theta), sin_t = std::sin(theta);
    float& a = neox ? head[i] : head[2 * i];
    float& b = neox ? head[i + pairs] : head[2 * i + 1];
    const float a0 = a, b0 = b;
    a = a0 * cos_t - b0 * sin_t;
    b = a0 * sin_t + b0 * cos_t;
    theta_base *= rope_theta_scale_;
  }
}

void Model::attention(int layer, int n, int n_past, KvCache& kv, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int group = c.n_head / c.n_head_kv;  // query heads sharing one KV head
  const int n_pos = n_past + n;
  const int dim_k = c.head_dim_k, dim_v = c.head_dim_v;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim_k));
  // One KV head per task. All the query heads of its group meet each cache
  // row together (ops.h), and every token of the batch meets a chunk of rows
  // while it is in L1: the cache is read from memory once per call.
  const int row_halves = std::max(dim_k, dim_v);
  const int chunk = std::max(8, static_cast<int>(kAttentionChunkBytes / (sizeof(uint16_t) * row_halves)) / 8 * 8);
  auto query = [&](int t, int h) { return &q_[static_cast<size_t>(t) * c.q_dim() + h * dim_k]; };
  auto output = [&](int t, int h) { return &attn_out_[(static_cast<size_t>(t) * c.n_head + h) * dim_v]; };

  // The query and the attention weights are rounded to float16, as llama.cpp
  // does when it multiplies them with its float16 cache. The rounding is tiny,
  // but attention amplifies it: without it our logits differ from llama.cpp's
  // by ~0.03 rms on quantized models, with it by ~0.0001.
  pool.parallel_for(c.n_head_kv, [&](int64_t begin, int64_t end) {
    // Per pool thread, kept across calls: a row of n_pos scores per (query,
    // query head of the group) of a block of kAttentionQueries, each row
    // starting on a cache line.
    thread_local std::vector<float> scores_storage;
    const size_t scores_stride = (n_pos + kLineFloats - 1) / kLineFloats * kLineFloats;
    const int block = std::min(n, kAttentionQueries);
    float* const scores = line_aligned(scores_storage, static_cast<size_t>(block) * group * scores_stride);
    for (int kv_head = static_cast<int>(begin); kv_head < end; ++kv_head) {
      const int first = kv_head * group;
      for (int t0 = 0; t0 < n; t0 += block) {
        const int t1 = std::min(n, t0 + block);
        auto row_scores = [&](int t, int g) { return scores + (static_cast<size_t>(t - t0) * group + g) * scores_stride; };
        // Calls visit(t, p0, count) for each chunk of positions from p0 and
        // every token t of the block that sees count > 0 of them: token t
        // attends to positions 0..n_past+t (causal). A single token takes
        // all its positions in one chunk: nothing is read twice, and the
        // kernels' requests for the rows ahead run on without a break.
        const int step = t1 - t0 > 1 ? chunk : n_past + t1;
        auto for_each_chunk = [&](auto visit) {
          for (int p0 = 0; p0 < n_past + t1; p0 += step)
            for (int t = std::max(t0, p0 - n_past); t < t1; ++t) visit(t, p0, std::min(step, n_past + t + 1 - p0));
        };
        for (int t = t0; t < t1; ++t)
          for (int g = 0; g < group; ++g) round_to_f16(query(t, first + g), dim_k);
        for_each_chunk([&](int t, int p0, int count) {
          attention_scores(query(t, first), dim_k, group, kv.key(layer, kv_head, p0), count, dim_k, scale,
                           row_scores(t, 0) + p0, scores_stride);
        });
        for (int t = t0; t < t1; ++t)
          for (int g = 0; g < group; ++g) {
            softmax(row_scores(t, g), n_past + t + 1);
            round_to_f16(row_scores(t, g), n_past + t + 1);
            std::fill_n(output(t, first + g), dim_v, 0.0f);
          }
        for_each_chunk([&](int t, int p0, int count) {
          add_weighted_values(row_scores(t, 0) + p0, scores_stride, group, kv.value(layer, kv_head, p0), count, dim_v,
                              output(t, first), dim_v);
        });
      }
    }
  });
}

void Model::feed_forward_dense(const LayerWeights& l, int n, ThreadPool& pool) {
  const int d = config_.n_embd, f = config_.n_ff;
  ffn_gate_.resize(static_cast<size_t>(n) * f);
  ffn_up_.resize(static_cast<size_t>(n) * f);
  matmul_.run(pool, l.w_gate, xb_.data(), n, d, ffn_gate_.data(), f);
  matmul_.run(pool, l.w_up, xb_.data(), n, d, ffn_up_.data(), f);
  swiglu(ffn_gate_.data(), ffn_up_.data(), n * f);
  matmul_.run(pool, l.w_down, ffn_gate_.data(), n, f, xb_.data(), d);
}

void Model::feed_forward_moe(const LayerWeights& l, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd, f = c.n_ff_expert, n_exp = c.n_expert, k = c.n_expert_used;

  // Route: softmax over the router logits, keep the top k, renormalise them.
  std::vector<float> probs(static_cast<size_t>(n) * n_exp);
  matmul_.run(pool, l.router, xb_.data(), n, d, probs.data(), n_exp);
  std::vector<std::vector<std::pair<int, float>>> routed(n_exp);  // expert -> (token, weight)
  std::vector<int> order(n_exp);
  for (int t = 0; t < n; ++t) {
    float* p = &probs[t * n_exp];
    softmax(p, n_exp);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += p[order[j]];
    for (int j = 0; j < k; ++j) routed[order[j]].push_back({t, p[order[j]] / sum});
  }

  // Each expert runs once over all the tokens routed to it.
  moe_out_.assign(static_cast<size_t>(n) * d, 0.0f);
  for (int e = 0; e < n_exp; ++e) {
    const auto& batch = routed[e];
    if (batch.empty()) continue;
    const int m = static_cast<int>(batch.size());
    moe_in_.resize(static_cast<size_t>(m) * d);
    for (int i = 0; i < m; ++i) std::copy_n(&xb_[batch[i].first * d], d, &moe_in_[i * d]);
    ffn_gate_.resize(static_cast<size_t>(m) * f);
    ffn_up_.resize(static_cast<size_t>(m) * f);
    matmul_.run(pool, l.gate_exps.slice(e), moe_in_.data(), m, d, ffn_gate_.data(), f);
    matmul_.run(pool, l.up_exps.slice(e), moe_in_.data(), m, d, ffn_up_.data(), f);
    swiglu(ffn_gate_.data(), ffn_up_.data(), m * f);
    matmul_.run(pool, l.down_exps.slice(e), ffn_gate_.data(), m, f, moe_in_.data(), d);
    for (int i = 0; i < m; ++i) axpy(&moe_out_[batch[i].first * d], batch[i].second, &moe_in_[i * d], d);
  }
  std::copy(moe_out_.begin(), moe_out_.end(), xb_.begin());
}

}  // namespace revis
