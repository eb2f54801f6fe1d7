// ModelWeights: views of a model's tensors inside the mapped GGUF file, with
// every shape checked at load against the ModelConfig. Matrices are used in
// place (never copied); 1-D tensors (norms, biases, RoPE factors) are small
// and are converted to float32 vectors once.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "gguf/gguf.h"
#include "model/config.h"
#include "quant/types.h"
#include "revis/status.h"

namespace revis {

struct PackedDot;

// A row-major matrix of `rows` rows, each `cols` values of `type`; for expert
// tensors a stack of `n_mats` such matrices.
//
// Or, where `stripes` is set, the same matrix kept in that packed form's
// stripes of rows (quant.h's PackedDot, weight_rows > 1; striped_weights.h):
// row_bytes is then a row's share of a stripe, each matrix of a stack
// starts on a whole stripe, and row() means nothing: only MatMul reads it.
struct Matrix {
  TensorType type = TensorType::F32;
  int64_t cols = 0;
  int64_t rows = 0;
  int64_t n_mats = 1;
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;
  const PackedDot* stripes = nullptr;

  bool empty() const { return data == nullptr; }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  // Rows one matrix of a stack takes: `rows`, or in stripes whole stripes.
  int64_t stored_rows() const;
  Matrix slice(int64_t mat) const;  // one matrix of a stack
};

struct LayerWeights {
  std::vector<float> attn_norm;
  Matrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;          // qwen2 only
  std::vector<float> q_norm, k_norm;      // qwen3 and gemma3, one head's width
  std::vector<float> attn_post_norm, ffn_post_norm;  // gemma3: on each branch's output
  std::vector<float> bo;                  // gpt-oss: attention output bias
  std::vector<float> attn_sinks;          // gpt-oss: one logit per query head
  // deepseek2's latent attention (config.h's Mla); wq when q_lora_rank is 0.
  Matrix wq_a, wq_b;                      // [n_embd] -> q_lora_rank -> every head's query
  std::vector<float> q_a_norm;
  Matrix wkv_a;                           // [n_embd] -> latent, then the RoPE key
  std::vector<float> kv_a_norm;
  Matrix wk_b;                            // n_head matrices [head_dim_nope] -> latent
  Matrix wv_b;                            // n_head matrices [latent] -> head_dim_v
  std::vector<float> ffn_norm;
  Matrix w_gate, w_up, w_down;            // dense FFN
  Matrix router;                          // [n_embd] -> n_expert logits
  std::vector<float> expert_bias;         // deepseek2 (exp_probs_b): added for the choice only
  std::vector<float> router_bias;         // gpt-oss: added to the router's logits
  Matrix gate_exps, up_exps, down_exps;   // stacks of n_expert matrices
  // gpt-oss: each expert's biases, n_expert rows of n_ff_expert (gate, up)
  // or n_embd (down) values.
  std::vector<float> gate_exps_bias, up_exps_bias, down_exps_bias;
  Matrix gate_shexp, up_shexp, down_shexp;  // deepseek2's shared experts, as one FFN
  std::vector<float> shexp_gate;            // qwen35moe: the shared expert's gate, one row
  // qwen35's recurrent layers (config.h's GatedDeltaNet): [q | k | v] before
  // the convolution, the output gate z, each value head's beta and decay
  // logits, and the output projection; the convolution's conv_kernel taps
  // per channel (conv_channels rows), the decay's bias (ssm_dt) and rate
  // (ssm_a, -exp(A_log)) per value head, the norm of a head's output.
  Matrix ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_out;
  std::vector<float> ssm_conv, ssm_dt_bias, ssm_a, ssm_norm;
  // gemma4 (config.h's Gemma4): the per-layer embedding's gate (n_embd ->
  // n_embd_per_layer) and projection back, the norm of its output, and the
  // layer output's factor (empty: none).
  Matrix per_layer_gate, per_layer_proj;
  std::vector<float> per_layer_post_norm, out_scale;
  // gemma4's experts beside the dense FFN (w_gate, w_up, w_down): the
  // router's input factors, the branches' norms, each expert's output
  // factor (empty: none).
  std::vector<float> router_scale, ffn_pre_norm_2, ffn_post_norm_1, ffn_post_norm_2, down_exps_scale;

  // Every matrix (the absent ones empty), for code that treats them alike.
  static constexpr size_t kMatrices = 26;
  std::array<Matrix*, kMatrices> matrices();
  std::array<const Matrix*, kMatrices> matrices() const;
  bool is_expert_stack(const Matrix& m) const { return &m == &gate_exps || &m == &up_exps || &m == &down_exps; }
};

// A multi-token-prediction block (the nextn block of deepseek2 and qwen35, docs/architecture.md):
// a transformer layer whose input mixes a token's embedding with the
// model's hidden state, and its own output head. The optional tensors fall
// back to the model's: embed (token_embd), head (output), head_norm
// (output_norm).
struct NextnWeights {
  LayerWeights layer;
  Matrix eh_proj;                         // [enorm(embedding) ; hnorm(hidden)] -> n_embd
  std::vector<float> enorm, hnorm;
  Matrix embed, head;
  std::vector<float> head_norm;
};

// deepseek4's mixing of the residual stream's n_hc copies
// (hyper_connections.h): fn makes the mix logits from the normalised
// copies, scale and base shape them.
struct HyperMix {
  Matrix fn;
  std::vector<float> base, scale;
};

// deepseek4's compressor: each position contributes a key part (wkv) and a
// score per value (wgate, plus ape's row for its place in the group); a
// group's softmax-weighted sum, normalised (norm), is one compressed key.
// Ratio 4 overlaps groups: rows are twice the key, the first half for the
// next group and the second for its own.
struct Compressor {
  Matrix wkv, wgate;
  std::vector<float> ape;   // ratio rows of wkv.rows values
  std::vector<float> norm;  // one key's width
  int ratio = 0;            // 0: none
};

// A deepseek4 block (config.h's Deepseek4).
struct Deepseek4Layer {
  HyperMix hc_attn, hc_ffn;
  std::vector<float> attn_norm, sinks;
  Matrix wq_a, wq_b;                     // n_embd -> q_lora_rank (normed by q_a_norm) -> heads
  std::vector<float> q_a_norm;
  Matrix wkv;                            // n_embd -> the shared key-value head (normed by kv_norm)
  std::vector<float> kv_norm;
  Matrix wo_a;                           // out_groups matrices: a group's heads -> out_rank
  Matrix wo_b;                           // out_groups * out_rank -> n_embd
  Compressor compressor;                 // ratio 0: none
  Compressor indexer_compressor;         // ratio 4 only: the indexer's keys
  Matrix indexer_proj;                   // n_embd -> the indexer heads' weights
  Matrix indexer_q_b;                    // q_lora_rank -> the indexer heads' queries
  std::vector<float> ffn_norm;
  Matrix router;
  std::vector<float> expert_bias;        // blocks routed by score
  std::vector<int32_t> token_experts;    // hash-routed blocks: n_vocab rows of n_expert_used ids
  Matrix gate_exps, up_exps, down_exps, gate_shexp, up_shexp, down_shexp;

  // Every matrix (the absent ones empty), for code that treats them alike.
  static constexpr size_t kMatrices = 20;
  std::array<Matrix*, kMatrices> matrices();
  std::array<const Matrix*, kMatrices> matrices() const;
  bool is_expert_stack(const Matrix& m) const { return &m == &gate_exps || &m == &up_exps || &m == &down_exps; }
};

struct ModelWeights {
  Matrix token_embd;
  std::vector<float> output_norm;
  Matrix output;                          // token_embd when the output is tied
  std::vector<float> rope_freq_factors;   // Llama 3.1-style (gemma4: its global layers'); empty when absent
  // gemma4's per-layer embeddings: per token n_layer slices of
  // n_embd_per_layer (per_layer_token_embd), the projection of the input
  // embedding to the same (per_layer_model_proj), and one slice's norm.
  Matrix per_layer_embd, per_layer_model_proj;
  std::vector<float> per_layer_proj_norm;
  std::vector<LayerWeights> layers;
  // The first multi-token-prediction block, when the file has one
  // (config.n_nextn_layer > 0 and tensors blk.{n_layer}.*); else empty.
  std::vector<NextnWeights> nextn;
  // deepseek4: its blocks (layers stays empty) and the mix of the stream's
  // copies into one before the output norm.
  std::vector<Deepseek4Layer> ds4_layers;
  HyperMix hc_head;
  // Matrices made at load rather than mapped: deepseek2's attn_k_b and
  // attn_v_b, from the fused attn_kv_b of older files; qwen3next's q, k, v,
  // z, beta and alpha rows, from its fused ssm_in and ssm_ba (in their
  // own type: rows reordered, not converted).
  std::vector<std::vector<float>> derived;
  std::vector<std::vector<uint8_t>> derived_rows;
  // The file's tensors that derived_rows were cut from (qwen3next's ssm_in
  // and ssm_ba, gemma4's ffn_gate_up_exps): nothing reads them after load.
  std::vector<const uint8_t*> split_sources;
};

// Binds the tensors of `file` to `config` (filling config.n_vocab). Errors
// name the tensor and the expected shape or type.
Result<ModelWeights> load_model_weights(const gguf::GgufFile& file, ModelConfig& config);

}  // namespace revis
