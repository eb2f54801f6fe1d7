// ModelConfig: the hyperparameters of a transformer, read from GGUF metadata
// alone (`<arch>.embedding_length`, `<arch>.attention.head_count`, ...).
// One struct describes every supported family; the family only switches a
// few flags (RoPE layout, QKV bias, QK-norm, routed experts, latent
// attention).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "revis/status.h"

namespace revis {

enum class Architecture { kLlama, kQwen2, kQwen3, kQwen3Moe, kDeepseek2, kDeepseek4, kGemma3, kGemma4, kGptOss, kQwen35,
                          kQwen35Moe, kQwen3Next };
const char* architecture_name(Architecture arch);

// How RoPE pairs up the dimensions of a head: adjacent (x[2i], x[2i+1]) as in
// the original Llama, or the two halves (x[i], x[i + d/2]) as in GPT-NeoX/Qwen.
enum class RopeLayout { kAdjacent, kNeox };

// How a mixture of experts turns router logits into expert weights:
// softmax over all experts (qwen3moe, DeepSeek V2), or a sigmoid per expert
// (DeepSeek V3) or sqrt(softplus) of each (DeepSeek V4), whose selection
// may add a per-expert bias; or the top k by logit, weighted by a softmax
// over those k logits alone (gpt-oss).
enum class ExpertGating { kSoftmax, kSigmoid, kSqrtSoftplus, kSoftmaxOfChosen };

// YaRN RoPE scaling (rope.scaling.type = yarn): pairs that turn fewer than
// beta_slow times over the original context are interpolated (theta *
// freq_scale), those turning more than beta_fast times keep theta, and a
// linear ramp mixes the two between.
struct Yarn {
  int n_ctx_orig = 0;        // rope.scaling.original_context_length
  float beta_fast = 32.0f, beta_slow = 1.0f;
  float log_multiplier = 0;  // rope.scaling.yarn_log_multiplier (DeepSeek's mscale_all_dim)
  float attn_factor = 1.0f;  // rope.scaling.attn_factor
};

// Multi-head latent attention (deepseek2). Each token caches one latent of
// kv_lora_rank values and one shared RoPE key of rope_dims values; every
// head's key and value are linear in the latent (attn_k_b, attn_v_b).
struct Mla {
  int q_lora_rank = 0;   // 0: the query comes from attn_q directly
  int kv_lora_rank = 0;  // 0: not MLA
  int head_dim_nope = 0; // the part of each head's key without RoPE
  int head_dim_v = 0;    // each head's value after attn_v_b
};

// DeepSeek V4 (deepseek4). Each block reads the
// residual stream as n_hc parallel copies mixed by learned weights
// (hyper-connections), and attends to a sliding window of raw keys plus,
// where its compression ratio is not 0, keys that each summarise `ratio`
// positions: ratio 4 through the lightning indexer, which picks the top_k
// of them per query, ratio 128 all of them. One shared head is both key and
// value (the file's key_length = value_length; head_dim_v is 0, as for MLA).
// The vectors hold one entry per block,
// the multi-token-prediction blocks included.
struct Deepseek4 {
  int q_lora_rank = 0;               // queries: n_embd -> q_lora_rank -> heads
  int n_swa = 0;                     // attention.sliding_window
  std::vector<int> compress_ratios;  // 0, 4 or 128
  float compress_rope_base = 0;      // RoPE base of the compressed blocks, which use the YaRN settings
  int n_hc = 0;                      // hyper_connection.count: copies of the residual stream
  int sinkhorn_iterations = 0;
  float hc_eps = 0;
  int n_hash_layer = 0;              // the first blocks route by token id (ffn_gate_tid2eid)
  int indexer_heads = 0, indexer_dim = 0, indexer_top_k = 0;
  int out_groups = 0, out_rank = 0;  // attn_output_a: groups of heads, each projected to out_rank
  std::vector<float> clamp_exp, clamp_shexp;  // SwiGLU limits of the routed and shared experts; 0 = none
};

// Local attention (gemma3, gemma4, gpt-oss): most layers see only the last
// `window` positions (a query at p meets keys at p - window + 1 .. p) and
// turn their RoPE with their own base (gemma3, gemma4: and no scaling);
// every `pattern`-th layer (the last of each group of `pattern`), or for
// gemma4 those its per-layer flags leave unmarked, is global and uses the
// file's rope.*.
struct SlidingWindow {
  int window = 0;                  // attention.sliding_window; 0: every layer global
  int pattern = 0;                 // attention.sliding_window_pattern
  std::vector<bool> local;         // gemma4: sliding_window_pattern as one flag per layer
  float rope_base = 10000.0f;      // rope.freq_base_swa
  // gemma4: a local layer's key and value widths (attention.key_length_swa,
  // value_length_swa); 0: the file's key_length and value_length.
  int head_dim_k = 0, head_dim_v = 0;
  bool is_local(int layer) const {
    if (!local.empty()) return window > 0 && local[layer];
    return window > 0 && layer % pattern < pattern - 1;
  }
};

// Gemma 4 beyond Gemma 3 (model.cpp's gemma4 notes). Per-layer
// embeddings: each layer adds a projection of its own slice of a second,
// per-token embedding (per_layer_token_embd, mixed with a projection of
// the input embedding), gated by the residual stream. Shared keys and
// values: the layers from first_shared_kv on compute queries only and
// read the cache of the last earlier layer of their kind (local or
// global). Values are RMS-normed without a weight (and are the keys'
// projection where the layer has no attn_v); attention's scores are not
// scaled; each layer's output may be multiplied by a learned scalar.
// Its mixture of experts (expert_count set) runs in every layer beside the
// dense FFN: the dense branch reads ffn_norm(x) and is normed by
// post_ffw_norm_1; the experts read pre_ffw_norm_2(x) and are normed by
// post_ffw_norm_2; the router reads norm(x) / sqrt(n_embd) times
// ffn_gate_inp.scale and picks the top k of a softmax, renormalised; each
// expert's output may be scaled (ffn_down_exps.scale); the two branches'
// sum goes through post_ffw_norm as a dense FFN's would.
struct Gemma4 {
  int n_embd_per_layer = 0;        // embedding_length_per_layer_input; 0: no per-layer embeddings
  int first_shared_kv = 0;         // block_count - attention.shared_kv_layers
  int rope_dims_local = 0;         // rope.dimension_count_swa
};

// Qwen3.5's gated delta-net layers (qwen35, qwen35moe, and qwen3next,
// Qwen3-Next, their forerunner; delta_net.cpp has the math).
// Most layers are recurrent: a token's input goes through a causal
// convolution over the last conv_kernel positions of q, k and v, then
// updates a state matrix per value head that the query reads. Every
// other layer (each full_attention_interval-th, or as the file's
// attention.recurrent_layers says) is full attention with a gated output.
// A key head serves v_heads / k_heads value heads: value head h reads key
// head h mod k_heads (qwen35, qwen35moe), or h / (v_heads / k_heads)
// (qwen3next, whose value heads come grouped by key head), as llama.cpp
// pairs them; every head is head_dim wide (ssm.state_size; ssm.inner_size
// = head_dim * v_heads).
struct GatedDeltaNet {
  int conv_kernel = 0;            // ssm.conv_kernel
  int head_dim = 0;               // ssm.state_size
  int k_heads = 0;                // ssm.group_count
  int v_heads = 0;                // ssm.time_step_rank
  std::vector<bool> recurrent;    // per layer
  bool grouped_heads = false;     // qwen3next's pairing of value heads with key heads
  int key_head(int v_head) const { return grouped_heads ? v_head / (v_heads / k_heads) : v_head % k_heads; }
  int key_dim() const { return k_heads * head_dim; }
  int value_dim() const { return v_heads * head_dim; }
  int conv_channels() const { return 2 * key_dim() + value_dim(); }
  // Floats of one layer's state: the convolution's last conv_kernel - 1
  // inputs, then a head_dim x head_dim matrix per value head.
  size_t conv_state_floats() const { return static_cast<size_t>(conv_kernel - 1) * conv_channels(); }
  size_t delta_state_floats() const { return static_cast<size_t>(head_dim) * head_dim * v_heads; }
  size_t state_floats() const { return conv_state_floats() + delta_state_floats(); }
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string name;
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  // The KV cache's rows: n_head_kv heads of head_dim_k key and head_dim_v
  // value halves per token. For MLA one head whose key row is the latent and
  // the RoPE key, and no value rows: the values are the latent part of the
  // key row (head_dim_v = 0).
  int n_head_kv = 0;
  int head_dim_k = 0;   // may differ from n_embd / n_head (Qwen3)
  int head_dim_v = 0;
  // The dense FFN's width: n_ff, or where the file gives one
  // feed_forward_length per layer (Gemma 4 E2B and E4B, whose shared-cache
  // layers are twice as wide) ff_widths[layer]; n_ff is then layer 0's.
  int n_ff = 0;
  std::vector<int> ff_widths;
  int ff_width(int layer) const { return ff_widths.empty() ? n_ff : ff_widths[layer]; }
  float rms_eps = 1e-5f;

  RopeLayout rope_layout = RopeLayout::kAdjacent;
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear or YaRN scaling: positions are multiplied by this
  int rope_dims = 0;             // leading dimensions of each head that rotate (MLA: the RoPE key)
  bool rope_yarn = false;
  Yarn yarn;

  // Mixture of experts (qwen3moe, deepseek2); zero for dense models.
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_expert = 0;
  int n_layer_dense_lead = 0;   // the first layers keep a dense FFN (deepseek2)
  int n_expert_shared = 0;      // experts every token passes (ffn_*_shexp), as one FFN
  // qwen35moe: the shared expert's width (expert_shared_feed_forward_length),
  // its output scaled per token by sigmoid(ffn_gate_inp_shexp . x); 0: none.
  int n_ff_shared = 0;
  int n_expert_groups = 0;      // experts come in groups; tokens pick from
  int n_expert_groups_used = 0; // the best groups only (DeepSeek V3)
  ExpertGating expert_gating = ExpertGating::kSoftmax;
  bool expert_weights_norm = true;   // the chosen experts' weights sum to one
  float expert_weights_scale = 1.0f; // then are multiplied by this

  Mla mla;
  // Query temperature by position (Llama 4, Mistral Large 3 as deepseek2):
  // queries at position p are multiplied by
  // 1 + attn_temp_scale * ln(floor(p / attn_temp_length) + 1); 0 = off.
  float attn_temp_scale = 0.0f;
  int attn_temp_length = 0;
  // The multi-token-prediction blocks after the n_layer of the model
  // (ARCH.nextn_predict_layers: deepseek2, deepseek4, qwen35, qwen35moe); the first drafts (weights.h's
  // NextnWeights, Model::forward_nextn).
  int n_nextn_layer = 0;

  bool has_qkv_bias = false;
  bool has_qk_norm = false;

  Deepseek4 ds4;
  bool is_deepseek4() const { return arch == Architecture::kDeepseek4; }
  // The hidden state a multi-token-prediction block reads per token: the
  // final one after the output norm (n_embd), or deepseek4's n_hc copies of
  // the stream before their output mix, as llama.cpp hands them over.
  int nextn_hidden_width() const { return is_deepseek4() ? ds4.n_hc * n_embd : n_embd; }

  // Gemma 3 (model.cpp's gemma3 notes): the embeddings scaled by
  // sqrt(n_embd), norms after attention and after the FFN, a GELU-gated
  // FFN, local layers, and logits soft-capped as cap * tanh(logit / cap).
  SlidingWindow sliding;
  bool has_post_norms = false;     // attn_post_norm and ffn_post_norm
  bool gelu_ffn = false;           // GELU (tanh form) instead of SiLU gating
  bool scale_embeddings = false;
  float logit_softcap = 0.0f;      // final_logit_softcapping; 0 = none
  Gemma4 gemma4;
  bool is_gemma4() const { return arch == Architecture::kGemma4; }

  // gpt-oss: a learned logit per query head joins each softmax as one more
  // position without a value (the attention "sink"); biases on the
  // attention output, the router and every expert matrix; experts whose
  // SwiGLU clamps its inputs (ops.h's swiglu_clamped); and the FFN's norm
  // stored as post_attention_norm.
  bool has_attn_sinks = false;
  bool has_ffn_biases = false;       // attn_output.bias, ffn_gate_inp.bias, ffn_*_exps.bias
  bool clamped_swiglu = false;

  // qwen35, qwen35moe, qwen3next: recurrent layers beside gated full
  // attention (GatedDeltaNet), whose queries carry an output gate per
  // head; qwen35's M-RoPE sections, of which a text token turns the first
  // three by its position and the fourth by 0 (rope.h); all 0 for
  // qwen3next, whose RoPE is plain NeoX.
  GatedDeltaNet delta_net;
  int rope_sections[4] = {0, 0, 0, 0};
  float attn_scale = 0.0f;  // attention.scale: the scores' factor; 0 = 1/sqrt(key width)
  bool is_hybrid() const {
    return arch == Architecture::kQwen35 || arch == Architecture::kQwen35Moe || arch == Architecture::kQwen3Next;
  }
  // The multi-token-prediction block after the n_layer layers is full
  // attention (llama.cpp's qwen35 loader flags only the trunk recurrent).
  bool is_recurrent(int layer) const {
    return is_hybrid() && layer < static_cast<int>(delta_net.recurrent.size()) && delta_net.recurrent[layer];
  }
  // The layers that keep keys and values, and the cache layer that layer
  // i writes or (gemma4's shared layers) reads.
  int n_kv_layer() const { return is_gemma4() ? gemma4.first_shared_kv : kv_layer(n_layer); }
  int kv_layer(int layer) const {
    if (is_gemma4() && layer >= gemma4.first_shared_kv)
      return gemma4.first_shared_kv - (sliding.is_local(layer) ? 2 : 1);
    if (!is_hybrid()) return layer;
    int k = 0;
    for (int i = 0; i < layer; ++i) k += delta_net.recurrent[i] ? 0 : 1;
    return k;
  }
  int n_recurrent_layer() const { return is_hybrid() ? n_layer - n_kv_layer() : 0; }
  // Floats of every recurrent layer's state together (KvCache::recurrent_state).
  size_t recurrent_state_floats() const { return n_recurrent_layer() * delta_net.state_floats(); }

  bool is_mla() const { return mla.kv_lora_rank > 0; }
  bool is_moe_layer(int layer) const { return n_expert > 0 && layer >= n_layer_dense_lead; }
  // The KV cache's values are the first halves of its key rows: MLA's
  // latent, deepseek4's shared key-value head.
  bool values_in_keys() const { return is_mla() || is_deepseek4(); }
  // Each query head's width: MLA's no-RoPE and RoPE parts, or a key's.
  int head_dim_q() const { return is_mla() ? mla.head_dim_nope + rope_dims : head_dim_k; }
  int q_dim() const { return n_head * head_dim_q(); }
  int kv_dim_k() const { return n_head_kv * head_dim_k; }
  int kv_dim_v() const { return n_head_kv * head_dim_v; }
  // Layer by layer, where gemma4's published shapes differ between layers:
  // its per-layer head_count_kv, its local layers' widths; else the above.
  std::vector<int> layer_head_kv;  // empty: n_head_kv in every layer
  int kv_heads(int layer) const { return layer_head_kv.empty() ? n_head_kv : layer_head_kv[layer]; }
  int key_width(int layer) const {
    return sliding.is_local(layer) && sliding.head_dim_k > 0 ? sliding.head_dim_k : head_dim_k;
  }
  int value_width(int layer) const {
    return sliding.is_local(layer) && sliding.head_dim_v > 0 ? sliding.head_dim_v : head_dim_v;
  }
};

// Reads and validates the hyperparameters. Errors name the key and the value
// that was expected ("qwen3.attention.head_count_kv: 3 does not divide 8").
Result<ModelConfig> read_model_config(const gguf::GgufFile& file);

}  // namespace revis
