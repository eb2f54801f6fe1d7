// The multi-token-prediction block's forward pass (the nextn block of
// deepseek2 and of qwen35 / qwen35moe, docs/architecture.md). For a token x
// at position p and a hidden state h:
//   x' = eh_proj [enorm(embed(x)) ; hnorm(h)]
//   x' = transformer block(x')            (its own KV rows, layer 0 of kv;
//                                          qwen35's is a gated full-attention
//                                          block, never a recurrent one)
//   h' = head_norm(x'),  logits = head h'
// h' is what a drafter feeds back as the next position's h. deepseek4's h
// is the stream's n_hc copies: each goes through eh_proj beside the same
// embedding, the block runs on the copies, h' is its output copies and the
// logits come from their output mix (deepseek4.cpp).
#include <algorithm>

#include "model/model.h"
#include "model/ops.h"
#include "quant/quant.h"

namespace revis {

Status Model::forward_nextn(std::span<const int32_t> tokens, std::span<const float> hidden, int n_past, KvCache& kv,
                            ThreadPool& pool, std::vector<float>& logits, std::vector<float>& out_hidden) {
  if (!has_nextn()) return Status::error("forward_nextn: the model has no multi-token-prediction block");
  if (Status s = check_batch(tokens, n_past, kv); !s.ok()) return s;
  const ModelConfig& c = config_;
  const NextnWeights& w = weights_.nextn.front();
  const int d = c.n_embd, n_all = static_cast<int>(tokens.size()), width = c.nextn_hidden_width();
  if (hidden.size() != static_cast<size_t>(n_all) * width)
    return Status::error("forward_nextn: " + std::to_string(hidden.size()) + " hidden values for " +
                         std::to_string(n_all) + " tokens of width " + std::to_string(width));
  if (c.is_deepseek4()) {
    for (int start = 0; start < n_all; start += kChunk)
      deepseek4_nextn_chunk(tokens.data() + start, &hidden[static_cast<size_t>(start) * width],
                            std::min(kChunk, n_all - start), n_past + start, kv, pool);
    // The last token's copies, and its logits through the output's mix.
    const int n = (n_all - 1) % kChunk + 1;
    out_hidden.assign(copies_.begin() + static_cast<size_t>(n - 1) * width, copies_.begin() + static_cast<size_t>(n) * width);
    read_copies(weights_.hc_head, /*head=*/true, n, pool);
    std::vector<float> mixed(d);
    rms_norm(mixed.data(), &xb_[static_cast<size_t>(n - 1) * d], w.head_norm.data(), d, c.rms_eps);
    logits.resize(c.n_vocab);
    matmul_.run(pool, w.head, mixed.data(), 1, d, logits.data(), c.n_vocab);
    return {};
  }
  for (int start = 0; start < n_all; start += kChunk) {
    const int n = std::min(kChunk, n_all - start);
    x_.resize(static_cast<size_t>(n) * d);
    xb_.resize(static_cast<size_t>(n) * d);
    nextn_in_.resize(static_cast<size_t>(n) * 2 * d);
    for (int t = 0; t < n; ++t) {
      float* row = &nextn_in_[static_cast<size_t>(t) * 2 * d];
      float* embedding = &xb_[static_cast<size_t>(t) * d];  // free until the block runs
      dequantize_row(w.embed.type, w.embed.row(tokens[start + t]), embedding, d);
      rms_norm(row, embedding, w.enorm.data(), d, c.rms_eps);
      rms_norm(row + d, &hidden[static_cast<size_t>(start + t) * d], w.hnorm.data(), d, c.rms_eps);
    }
    matmul_.run(pool, w.eh_proj, nextn_in_.data(), n, 2 * d, x_.data(), d);
    const Segment segment{&kv, n_past + start, 0, n};
    transformer_block(w.layer, c.is_moe_layer(c.n_layer), 0, n, {&segment, 1}, pool);
  }
  const int last = (n_all - 1) % kChunk;
  out_hidden.resize(d);
  rms_norm(out_hidden.data(), &x_[static_cast<size_t>(last) * d], w.head_norm.data(), d, c.rms_eps);
  logits.resize(c.n_vocab);
  matmul_.run(pool, w.head, out_hidden.data(), 1, d, logits.data(), c.n_vocab);
  return {};
}

}  // namespace revis
