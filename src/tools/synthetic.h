// Synthetic models: GGUF files with random weights and the exact layout of a
// real architecture, for demos, tests and benchmarks without downloads.
// The same spec and seed always give the same file. Types that need an
// importance matrix (the IQ1 and IQ2 mixes, MOE-2BIT) weigh every channel
// the same: random weights have no activations to weigh.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/thread_pool.h"
#include "revis/status.h"
#include "tools/quantize.h"

namespace revis {

struct SyntheticSpec {
  // llama, qwen2, qwen3, qwen3moe, deepseek2, deepseek4, gemma3, gemma4,
  // gpt-oss, qwen35, qwen35moe, qwen3next
  std::string arch = "llama";
  std::string name = "synthetic";
  int n_embd = 256;
  int n_layer = 2;
  int n_head = 8;
  int n_head_kv = 2;
  int head_dim = 0;            // 0 = n_embd / n_head
  int n_ff = 768;
  int n_expert = 0, n_expert_used = 0, n_ff_expert = 0;
  // deepseek2: latent attention (head_dim is a key's part without RoPE;
  // n_head_kv is ignored), leading dense layers of n_ff, shared experts,
  // and the V3 router (sigmoid with a choice bias, expert groups) or V2's.
  int q_lora_rank = 0, kv_lora_rank = 0, rope_dim = 0, head_dim_v = 0;
  int n_layer_dense_lead = 1, n_expert_shared = 0, n_expert_groups = 0, n_expert_groups_used = 0;
  bool sigmoid_gating = false;
  float expert_weights_scale = 1.0f;
  // deepseek4: the query bottleneck (q_lora_rank, default n_embd / 2), the
  // RoPE dims (rope_dim, default a quarter of the head), experts, at least
  // one shared expert (one where 0), its window (sliding_window, default
  // 64), YaRN over yarn_original_context where rope_scale is set (default
  // 4 over a quarter of n_ctx), and these, 0 meaning the miniature's
  // default: raw blocks before the ones that alternate compression ratios 4
  // and 128 (1), the indexer's heads (4), key width (the head's) and picks
  // per query (16), the output projection's groups (2, 1 for an odd head
  // count) and rank per group (the head's width), and the leading blocks
  // routed by token id (1, at most n_layer).
  int ds4_raw_layers = 0, indexer_heads = 0, indexer_dim = 0, indexer_top_k = 0;
  int out_groups = 0, out_rank = 0, hash_layers = 0;
  // deepseek2, qwen35, qwen35moe: multi-token-prediction blocks after the n_layer (block
  // n_layer + i, with its nextn.eh_proj, enorm, hnorm and shared_head_norm;
  // the embedding and the head are the model's).
  int n_nextn_layer = 0;
  int n_ctx = 4096;
  float rope_base = 10000.0f;
  // gemma3: sliding-window layers (every sliding_pattern-th layer global)
  // with their own RoPE base, linear RoPE scaling of the global layers
  // (rope_scale: the factor, 0 = none), and the logits' soft cap (0 = none).
  // gpt-oss: sliding_window on every other layer (the pattern is fixed at
  // 2), YaRN scaling by rope_scale over yarn_original_context on all of
  // them, experts in MXFP4 whatever the quantized mix (float in a float
  // one), random biases and sinks.
  int sliding_window = 0, sliding_pattern = 6;
  float rope_base_swa = 10000.0f, rope_scale = 0.0f, logit_softcap = 0.0f;
  int yarn_original_context = 4096;
  bool tied_output = false;
  // gemma4: gemma3's features with local layers every sliding_pattern-th
  // one global (written as one flag per layer), per-layer embeddings of
  // n_embd_per_layer per layer, the last shared_kv_layers layers reading
  // the cache of the last local and global layer before them, a factor on
  // each layer's output, and its global layers' RoPE turning half the
  // pairs (rope_freqs). With n_expert, every layer's experts run beside
  // its dense FFN of n_ff, with their router's and outputs' factors.
  int n_embd_per_layer = 0, shared_kv_layers = 0;
  // gemma4 with n_expert: each expert's gate and up matrices written as
  // one ffn_gate_up_exps stack (gate rows, then up rows), as published
  // Gemma 4 MoE files have them.
  bool fused_gate_up_exps = false;
  // gemma4's published shapes: head_dim is both kinds of layers' width
  // unless the global layers have their own (head_dim_global, written as
  // key_length) or the local ones (head_dim_swa, key_length_swa); KV heads
  // likewise n_head_kv unless the global layers have their own
  // (n_head_kv_global) or every layer is given one (layer_kv_heads), then
  // written as one head_count_kv per layer; global layers without attn_v,
  // their keys' projection serving as values (global_k_eq_v); the
  // shared-cache layers' FFN twice n_ff wide, written as one
  // feed_forward_length per layer (double_wide_shared_ffn); the share of a
  // global head's pairs that turn (rope_freqs).
  int head_dim_global = 0, head_dim_swa = 0, n_head_kv_global = 0;
  std::vector<int> layer_kv_heads = {};
  bool global_k_eq_v = false, double_wide_shared_ffn = false;
  float global_rope_share = 0.5f;
  // qwen35 (and qwen35moe, whose FFNs are experts beside a gated shared
  // expert n_ff wide; and qwen3next, qwen35moe with its projections fused
  // and no sections): every full_attention_interval-th layer attends (a gated
  // attention whose RoPE turns rope_dim dims in M-RoPE sections), the
  // others are gated delta-nets: a convolution of conv_kernel taps, k_heads
  // key heads and v_heads value heads of ssm_head_dim.
  int full_attention_interval = 4, conv_kernel = 4, ssm_head_dim = 0, ssm_k_heads = 0, ssm_v_heads = 0;
  std::vector<int32_t> rope_sections = {};
  // Vocabulary: copied from this GGUF's tokenizer.* metadata when set;
  // otherwise a built-in byte-level vocabulary (one token per byte plus
  // ChatML specials), padded with unused tokens up to n_vocab.
  std::string vocab_from;
  int n_vocab = 0;
  QuantMix mix = QuantMix::kF16;
  uint64_t seed = 1;
};

// Named shapes of real models: "llama-3.2-1b", "llama-3.1-8b", "qwen3-0.6b",
// "qwen3-4b", "qwen3-30b-a3b", "deepseek-v2-lite", "deepseek-v3-small" (a
// V3-style router and latent attention at 1.4B), "deepseek-v4-flash"
// (284B; shrink it with n_layer and n_expert), "deepseek-v4-tiny" (V4
// Flash's layout at a few MB), "gemma-3-4b", "tiny" (a few MB, for the
// demo), "gemma3-small" (a few MB: six layers, the last global, window
// 32), "gemma4-small" (gemma3-small's shape, every third layer global,
// the last three sharing caches, per-layer embeddings of 32), "qwen3moe-tiny", "deepseek2-tiny", "gpt-oss-tiny", "qwen35-tiny",
// "qwen35moe-tiny" and "qwen3next-tiny" (a few MB each), "gpt-oss-20b",
// "qwen3.5-9b", and Gemma 4's "gemma-4-e2b", "gemma-4-e4b",
// "gemma-4-26b-a4b" and "gemma-4-31b" (shrink them with n_layer and
// n_vocab).
std::optional<SyntheticSpec> synthetic_preset(const std::string& name);
// `spec` cut (or grown) to n_layer blocks. A gemma4 spec whose last layers
// read earlier caches keeps about the same share of them, after whole
// groups of local layers and their global one (--like with --layers).
SyntheticSpec with_layers(SyntheticSpec spec, int n_layer);
// The preset `--arch NAME` alone makes for an architecture whose defaults
// are not enough (experts, windows, compression), or none.
std::optional<std::string> synthetic_miniature(const std::string& arch);
std::vector<std::string> synthetic_preset_names();

// What the file of a spec would hold, without writing it: its tensors'
// bytes, and the weight bytes one token reads (Model::bytes_per_token's
// count: every matrix once, n_expert_used of each expert stack's n_expert,
// one row of each embedding table; the multi-token-prediction blocks, vectors, position
// biases and hash tables aside).
struct SyntheticSize {
  int n_tensors = 0;
  uint64_t tensor_bytes = 0;
  uint64_t bytes_per_token = 0;
};
Result<SyntheticSize> synthetic_model_size(const SyntheticSpec& spec);

// Writes the model; progress reports (tensors done, total, name).
Status write_synthetic_model(const SyntheticSpec& spec, const std::string& path, ThreadPool& pool,
                             const QuantizeProgress& progress);

}  // namespace revis
