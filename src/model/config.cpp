#include "model/config.h"

#include <algorithm>

namespace revis {
namespace {

struct ArchEntry {
  const char* gguf_name;
  Architecture arch;
};
constexpr ArchEntry kArchitectures[] = {
    {"llama", Architecture::kLlama},
    {"qwen2", Architecture::kQwen2},
    {"qwen3", Architecture::kQwen3},
    {"qwen3moe", Architecture::kQwen3Moe},
    {"deepseek2", Architecture::kDeepseek2},
    {"deepseek4", Architecture::kDeepseek4},
    {"gemma3", Architecture::kGemma3},
    {"gemma4", Architecture::kGemma4},
    {"gpt-oss", Architecture::kGptOss},
    {"qwen35", Architecture::kQwen35},
    {"qwen35moe", Architecture::kQwen35Moe},
    {"qwen3next", Architecture::kQwen3Next},
};

constexpr int64_t kMaxDim = 1 << 20;

// Reads `<arch>.<suffix>` as a positive int within [min, max].
Status read_dim(const gguf::GgufFile& f, const std::string& key, int64_t fallback, int64_t min, int64_t max,
                int& out) {
  auto v = f.get_int(key, fallback);
  if (!v.ok()) return v.status();
  if (*v < min || *v > max)
    return Status::error(key + ": " + (f.find(key) ? std::to_string(*v) : std::string("missing")) +
                         " (expected an integer in " + std::to_string(min) + ".." + std::to_string(max) + ")");
  out = static_cast<int>(*v);
  return {};
}

// Reads `key`, one int per layer or one for all, each within [min, max]:
// `out` is the first layer's, `per_layer` (n_layer values) filled only when
// the file gives an array.
Status read_dims_per_layer(const gguf::GgufFile& f, const std::string& key, int n_layer, int64_t min, int64_t max,
                           int& out, std::vector<int>& per_layer) {
  const gguf::Value* v = f.find(key);
  if (!v || !v->as_array()) return read_dim(f, key, 0, min, max, out);
  auto values = f.get_int_array(key);
  if (!values.ok()) return values.status();
  if (static_cast<int>(values->size()) != n_layer)
    return Status::error(key + ": " + std::to_string(values->size()) + " values (expected one per layer, " +
                         std::to_string(n_layer) + ")");
  for (size_t i = 0; i < values->size(); ++i) {
    const int64_t x = (*values)[i];
    if (x < min || x > max)
      return Status::error(key + "[" + std::to_string(i) + "]: " + std::to_string(x) + " (expected an integer in " +
                           std::to_string(min) + ".." + std::to_string(max) + ")");
    per_layer.push_back(static_cast<int>(x));
  }
  out = per_layer[0];
  return {};
}

// Reads `key` as a float within [min, max].
Status read_float(const gguf::GgufFile& f, const std::string& key, double fallback, double min, double max,
                  float& out) {
  auto v = f.get_float(key, fallback);
  if (!v.ok()) return v.status();
  if (!(*v >= min && *v <= max))
    return Status::error(key + ": " + std::to_string(*v) + " (expected a value in " + std::to_string(min) + ".." +
                         std::to_string(max) + ")");
  out = static_cast<float>(*v);
  return {};
}

// The routed and shared experts (qwen3moe, deepseek2).
Status read_experts(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  Status s;
  if (!(s = read_dim(f, p + "expert_count", 0, 1, 4096, c.n_expert)).ok()) return s;
  if (!(s = read_dim(f, p + "expert_used_count", 0, 1, c.n_expert, c.n_expert_used)).ok()) return s;
  if (!(s = read_dim(f, p + "expert_feed_forward_length", 0, 1, kMaxDim, c.n_ff_expert)).ok()) return s;
  if (c.arch == Architecture::kQwen35Moe || c.arch == Architecture::kQwen3Next) {
    // As llama.cpp: the FFN's width where the file gives no shared width.
    auto dense = f.get_int(p + "feed_forward_length", 0);
    if (!dense.ok()) return dense.status();
    return read_dim(f, p + "expert_shared_feed_forward_length", *dense, 1, kMaxDim, c.n_ff_shared);
  }
  if (c.arch != Architecture::kDeepseek2 && c.arch != Architecture::kDeepseek4) return {};

  if (!(s = read_dim(f, p + "leading_dense_block_count", 0, 0, c.n_layer, c.n_layer_dense_lead)).ok()) return s;
  if (!(s = read_dim(f, p + "expert_shared_count", 0, 0, 64, c.n_expert_shared)).ok()) return s;
  if (!(s = read_dim(f, p + "expert_group_count", 0, 0, c.n_expert, c.n_expert_groups)).ok()) return s;
  if (!(s = read_dim(f, p + "expert_group_used_count", c.n_expert_groups, 0, c.n_expert_groups,
                     c.n_expert_groups_used)).ok())
    return s;
  if (c.n_expert_groups > 1 && c.n_expert % c.n_expert_groups != 0)
    return Status::error(p + "expert_group_count: " + std::to_string(c.n_expert_groups) +
                         " does not divide expert_count " + std::to_string(c.n_expert));
  if (!(s = read_float(f, p + "expert_weights_scale", 1.0, 1e-6, 1e6, c.expert_weights_scale)).ok()) return s;
  auto norm = f.get_bool(p + "expert_weights_norm", false);
  if (!norm.ok()) return norm.status();
  c.expert_weights_norm = *norm;
  // 1 softmax, 2 sigmoid, 4 sqrt(softplus); files from before the key are
  // softmax (V2). DeepSeek V4 scores with sqrt(softplus) only.
  auto gating = f.get_int(p + "expert_gating_func", 1);
  if (!gating.ok()) return gating.status();
  if (c.arch == Architecture::kDeepseek4) {
    if (*gating != 4)
      return Status::error(p + "expert_gating_func: " + std::to_string(*gating) + " (expected 4, sqrt(softplus))");
    c.expert_gating = ExpertGating::kSqrtSoftplus;
    return {};
  }
  if (*gating != 0 && *gating != 1 && *gating != 2)
    return Status::error(p + "expert_gating_func: " + std::to_string(*gating) + " (expected 1 softmax or 2 sigmoid)");
  c.expert_gating = *gating == 2 ? ExpertGating::kSigmoid : ExpertGating::kSoftmax;
  return {};
}

// Multi-head latent attention (deepseek2). The file's key_length and
// value_length describe the cache (latent + RoPE key, latent);
// key_length_mla and value_length_mla the heads. Files from before those
// keys give the heads' lengths in key_length and value_length.
Status read_mla(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  Status s;
  Mla& m = c.mla;
  int head_dim_k = 0;
  if (!(s = read_dim(f, p + "attention.kv_lora_rank", 0, 1, 1 << 16, m.kv_lora_rank)).ok()) return s;
  if (!(s = read_dim(f, p + "attention.q_lora_rank", 0, 0, 1 << 16, m.q_lora_rank)).ok()) return s;
  if (!(s = read_dim(f, p + "attention.key_length_mla", c.head_dim_k, 2, 4096, head_dim_k)).ok()) return s;
  if (!(s = read_dim(f, p + "attention.value_length_mla", c.head_dim_v, 1, 4096, m.head_dim_v)).ok()) return s;
  if (c.rope_dims >= head_dim_k)
    return Status::error(p + "rope.dimension_count: " + std::to_string(c.rope_dims) +
                         " leaves no key dimensions without RoPE in attention.key_length_mla " +
                         std::to_string(head_dim_k));
  m.head_dim_nope = head_dim_k - c.rope_dims;
  const int cache_k = m.kv_lora_rank + c.rope_dims;
  if (f.find(p + "attention.key_length_mla") && c.head_dim_k != cache_k)
    return Status::error(p + "attention.key_length: " + std::to_string(c.head_dim_k) +
                         ", expected kv_lora_rank + rope.dimension_count = " + std::to_string(cache_k));
  c.n_head_kv = 1;
  c.head_dim_k = cache_k;
  c.head_dim_v = 0;
  if (!(s = read_float(f, p + "attention.temperature_scale", 0.0, 0.0, 100.0, c.attn_temp_scale)).ok()) return s;
  if (c.attn_temp_scale != 0 &&
      !(s = read_dim(f, p + "attention.temperature_length", 0, 1, 1 << 24, c.attn_temp_length)).ok())
    return s;
  return {};
}

// A per-block float: an array of one value per block, or one value for all.
Status read_per_block(const gguf::GgufFile& f, const std::string& key, int n_blocks, std::vector<float>& out) {
  const gguf::Value* v = f.find(key);
  if (v && !v->as_array()) {
    float value = 0;
    if (Status s = read_float(f, key, 0.0, 0.0, 1e6, value); !s.ok()) return s;
    out.assign(n_blocks, value);
    return {};
  }
  auto values = f.get_float_array(key);
  if (!values.ok()) return values.status();
  if (!v) {
    out.clear();
    return {};
  }
  if (static_cast<int>(values->size()) < n_blocks)
    return Status::error(key + ": " + std::to_string(values->size()) + " values (expected one per block, " +
                         std::to_string(n_blocks) + ")");
  for (float x : *values)
    if (!(x >= 0 && x <= 1e6)) return Status::error(key + ": " + std::to_string(x) + " (expected a value in 0..1e6)");
  out.assign(values->begin(), values->begin() + n_blocks);
  return {};
}

// DeepSeek V4's attention, hyper-connections and routing (config.h's
// Deepseek4). The block count here includes the multi-token-prediction
// blocks, which have a compression ratio and clamps of their own.
Status read_deepseek4(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  Deepseek4& d = c.ds4;
  const int n_blocks = c.n_layer + c.n_nextn_layer;
  Status s;
  if (c.n_head_kv != 1)
    return Status::error(p + "attention.head_count_kv: " + std::to_string(c.n_head_kv) +
                         " (expected 1: one head is every query head's key and value)");
  if (c.head_dim_v != c.head_dim_k)
    return Status::error(p + "attention.value_length: " + std::to_string(c.head_dim_v) +
                         " (expected key_length " + std::to_string(c.head_dim_k) + ": the key is the value)");
  if (c.rope_dims % 2 != 0) return Status::error(p + "rope.dimension_count: must be even");
  c.head_dim_v = 0;  // the cache's values are its keys (kv_cache.h)
  if (!(s = read_dim(f, p + "attention.q_lora_rank", 0, 1, 1 << 16, d.q_lora_rank)).ok()) return s;
  if (!(s = read_dim(f, p + "attention.sliding_window", 0, 1, 1 << 24, d.n_swa)).ok()) return s;
  if (!(s = read_dim(f, p + "hyper_connection.count", 0, 1, 64, d.n_hc)).ok()) return s;
  if (!(s = read_dim(f, p + "hyper_connection.sinkhorn_iterations", 0, 1, 1000, d.sinkhorn_iterations)).ok())
    return s;
  if (!(s = read_float(f, p + "hyper_connection.epsilon", 0.0, 1e-30, 0.5, d.hc_eps)).ok()) return s;
  if (!(s = read_dim(f, p + "hash_layer_count", 0, 0, c.n_layer, d.n_hash_layer)).ok()) return s;
  if (!(s = read_dim(f, p + "attention.output_group_count", 0, 1, c.n_head, d.out_groups)).ok()) return s;
  if (c.n_head % d.out_groups != 0)
    return Status::error(p + "attention.output_group_count: " + std::to_string(d.out_groups) +
                         " does not divide head_count " + std::to_string(c.n_head));
  if (!(s = read_dim(f, p + "attention.output_lora_rank", 0, 1, 1 << 16, d.out_rank)).ok()) return s;

  auto base = f.get_float(p + "attention.compress_rope_freq_base", 0.0);
  if (!base.ok()) return base.status();
  if (!(*base > 1)) return Status::error(p + "attention.compress_rope_freq_base: expected a value above 1");
  d.compress_rope_base = static_cast<float>(*base);

  auto ratios = f.get_int_array(p + "attention.compress_ratios");
  if (!ratios.ok()) return ratios.status();
  if (static_cast<int>(ratios->size()) < n_blocks)
    return Status::error(p + "attention.compress_ratios: " + std::to_string(ratios->size()) +
                         " values (expected one per block, " + std::to_string(n_blocks) + ")");
  bool indexed = false;
  for (int i = 0; i < n_blocks; ++i) {
    const int64_t r = (*ratios)[i];
    if (r != 0 && r != 4 && r != 128)
      return Status::error(p + "attention.compress_ratios: block " + std::to_string(i) + " has " + std::to_string(r) +
                           " (expected 0, 4 or 128)");
    d.compress_ratios.push_back(static_cast<int>(r));
    indexed = indexed || r == 4;
  }
  if (indexed) {
    if (!(s = read_dim(f, p + "attention.indexer.head_count", 0, 1, 4096, d.indexer_heads)).ok()) return s;
    if (!(s = read_dim(f, p + "attention.indexer.key_length", 0, c.rope_dims, 4096, d.indexer_dim)).ok()) return s;
    // More picks than the training context has compressed positions would
    // mean the indexer never chooses.
    if (!(s = read_dim(f, p + "attention.indexer.top_k", 0, 1, std::max(1, c.n_ctx_train / 4), d.indexer_top_k)).ok())
      return s;
  }
  if (!(s = read_per_block(f, p + "swiglu_clamp_exp", n_blocks, d.clamp_exp)).ok()) return s;
  if (!(s = read_per_block(f, p + "swiglu_clamp_shexp", n_blocks, d.clamp_shexp)).ok()) return s;
  if (d.clamp_exp.empty()) d.clamp_exp.assign(n_blocks, 0.0f);
  if (d.clamp_shexp.empty()) d.clamp_shexp = d.clamp_exp;
  return {};
}

// Gemma 3: local layers when the file gives a window (none, as llama.cpp
// reads it, makes every layer global), the soft-capping of the logits.
Status read_gemma3(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  Status s;
  SlidingWindow& w = c.sliding;
  const std::string window_key = p + "attention.sliding_window";
  if (f.find(window_key)) {
    if (!(s = read_dim(f, window_key, 0, 1, 1 << 24, w.window)).ok()) return s;
    const std::string pattern_key = p + "attention.sliding_window_pattern";
    if (!(s = read_dim(f, pattern_key, 6, 1, 4096, w.pattern)).ok()) return s;
    if (!(s = read_float(f, p + "rope.freq_base_swa", 10000.0, 1.0 + 1e-6, 1e12, w.rope_base)).ok()) return s;
  }
  if (!(s = read_float(f, p + "final_logit_softcapping", 0.0, 0.0, 1e6, c.logit_softcap)).ok()) return s;
  c.has_post_norms = true;
  c.gelu_ffn = true;
  c.scale_embeddings = true;
  return {};
}

// Gemma 4 (config.h's Gemma4): Gemma 3's features, local layers flagged
// one by one, per-layer embeddings and shared caches, the local layers'
// own head width (key_length_swa) and, read with the other families',
// per-layer KV head counts and FFN widths. With
// expert_count every layer is a mixture of experts beside its dense FFN
// (config.h's Gemma4), read with the other families' experts below.
Status read_gemma4(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  Status s;
  SlidingWindow& w = c.sliding;
  Gemma4& g = c.gemma4;
  if (!(s = read_dim(f, p + "attention.sliding_window", 0, 1, 1 << 24, w.window)).ok()) return s;
  const std::string pattern_key = p + "attention.sliding_window_pattern";
  auto flags = f.get_int_array(pattern_key);
  if (!flags.ok()) return flags.status();
  if (static_cast<int>(flags->size()) != c.n_layer)
    return Status::error(pattern_key + ": " + std::to_string(flags->size()) + " flags (expected one per layer, " +
                         std::to_string(c.n_layer) + ")");
  for (int64_t v : *flags) w.local.push_back(v != 0);
  if (!(s = read_float(f, p + "rope.freq_base_swa", 10000.0, 1.0 + 1e-6, 1e12, w.rope_base)).ok()) return s;
  // The local layers' heads may be narrower than the global ones' (the
  // published files: 256 against 512); each kind's key is as wide as its value.
  if (c.head_dim_k != c.head_dim_v)
    return Status::error(p + "attention.value_length: " + std::to_string(c.head_dim_v) + " (expected key_length " +
                         std::to_string(c.head_dim_k) + ")");
  if (!(s = read_dim(f, p + "attention.key_length_swa", c.head_dim_k, 2, 4096, w.head_dim_k)).ok()) return s;
  if (!(s = read_dim(f, p + "attention.value_length_swa", w.head_dim_k, 1, 4096, w.head_dim_v)).ok()) return s;
  if (w.head_dim_k % 2 != 0) return Status::error(p + "attention.key_length_swa: must be even for RoPE");
  if (w.head_dim_v != w.head_dim_k)
    return Status::error(p + "attention.value_length_swa: " + std::to_string(w.head_dim_v) +
                         " (expected key_length_swa " + std::to_string(w.head_dim_k) + ")");
  if (!(s = read_dim(f, p + "rope.dimension_count_swa", std::min(c.rope_dims, w.head_dim_k), 2, w.head_dim_k,
                     g.rope_dims_local)).ok())
    return s;
  if (!(s = read_dim(f, p + "embedding_length_per_layer_input", 0, 0, kMaxDim, g.n_embd_per_layer)).ok()) return s;
  int shared = 0;
  if (!(s = read_dim(f, p + "attention.shared_kv_layers", 0, 0, c.n_layer, shared)).ok()) return s;
  g.first_shared_kv = c.n_layer - shared;
  if (shared > 0) {
    // The shared layers read the last local and the last global layer
    // before them (llama.cpp's pairing), which must be of those kinds.
    const int first = g.first_shared_kv;
    if (first < 2 || !w.is_local(first - 2) || w.is_local(first - 1))
      return Status::error(p + "attention.shared_kv_layers: " + std::to_string(shared) +
                           " (expected the layers before the shared ones to end with a local and a global layer)");
  }
  // Absent, Gemma 4's logits are capped at 30 (its published value, and
  // llama.cpp's default for the architecture); 0 in the file turns it off.
  if (!(s = read_float(f, p + "final_logit_softcapping", 30.0, 0.0, 1e6, c.logit_softcap)).ok()) return s;
  c.has_post_norms = true;
  c.gelu_ffn = true;
  c.scale_embeddings = true;
  c.attn_scale = 1.0f;
  c.expert_gating = ExpertGating::kSoftmax;
  c.expert_weights_norm = true;
  return {};
}

// gpt-oss: alternate local and global layers (the window is required: a
// local layer of window 0 would see nothing), both turning RoPE with the
// file's scaling; routing and the features config.h lists under gpt-oss.
Status read_gpt_oss(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  Status s;
  SlidingWindow& w = c.sliding;
  if (!(s = read_dim(f, p + "attention.sliding_window", 0, 1, 1 << 24, w.window)).ok()) return s;
  if (!(s = read_dim(f, p + "attention.sliding_window_pattern", 2, 1, 4096, w.pattern)).ok()) return s;
  if (!(s = read_float(f, p + "rope.freq_base_swa", c.rope_base, 1.0 + 1e-6, 1e12, w.rope_base)).ok()) return s;
  c.expert_gating = ExpertGating::kSoftmaxOfChosen;
  c.expert_weights_norm = false;
  c.has_qkv_bias = true;
  c.has_attn_sinks = true;
  c.has_ffn_biases = true;
  c.clamped_swiglu = true;
  return {};
}

// Qwen3.5's gated attention: a value as wide as its key (the output gate
// is one), an optional scale, QK-norm.
Status read_attention_scale(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  if (c.head_dim_v != c.head_dim_k)
    return Status::error(p + "attention.value_length: " + std::to_string(c.head_dim_v) + " (expected key_length " +
                         std::to_string(c.head_dim_k) + ")");
  c.has_qk_norm = true;
  return read_float(f, p + "attention.scale", 0.0, 0.0, 1e6, c.attn_scale);
}

// Qwen3.5: the gated delta-net's shape (config.h's GatedDeltaNet), which
// layers are recurrent, the M-RoPE sections (none for qwen3next) and the
// attention's scale.
Status read_qwen35(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  Status s;
  GatedDeltaNet& g = c.delta_net;
  if (!(s = read_dim(f, p + "ssm.conv_kernel", 0, 1, 64, g.conv_kernel)).ok()) return s;
  if (!(s = read_dim(f, p + "ssm.state_size", 0, 1, 1024, g.head_dim)).ok()) return s;
  if (!(s = read_dim(f, p + "ssm.time_step_rank", 0, 1, 4096, g.v_heads)).ok()) return s;
  if (!(s = read_dim(f, p + "ssm.group_count", 0, 1, g.v_heads, g.k_heads)).ok()) return s;
  if (g.v_heads % g.k_heads != 0)
    return Status::error(p + "ssm.group_count: " + std::to_string(g.k_heads) + " does not divide ssm.time_step_rank " +
                         std::to_string(g.v_heads));
  int inner = 0;
  if (!(s = read_dim(f, p + "ssm.inner_size", 0, 1, kMaxDim, inner)).ok()) return s;
  if (static_cast<int64_t>(inner) != int64_t{g.head_dim} * g.v_heads)
    return Status::error(p + "ssm.inner_size: " + std::to_string(inner) + " (expected ssm.state_size x ssm.time_step_rank = " +
                         std::to_string(int64_t{g.head_dim} * g.v_heads) + ")");
  // A layer's state is read and written whole for every token: more than
  // 1 GiB of it is no model anyone runs, and would overflow the sizes below.
  if (g.delta_state_floats() + g.conv_state_floats() > (size_t{1} << 28))
    return Status::error(p + "ssm.state_size: " + std::to_string(g.head_dim) + " x " + std::to_string(g.head_dim) +
                         " x " + std::to_string(g.v_heads) + " heads is a recurrent state of more than 1 GiB per layer");

  const std::string layers_key = p + "attention.recurrent_layers";
  if (f.find(layers_key)) {
    auto flags = f.get_int_array(layers_key);
    if (!flags.ok()) return flags.status();
    if (static_cast<int>(flags->size()) < c.n_layer)
      return Status::error(layers_key + ": " + std::to_string(flags->size()) + " values (expected one per layer, " +
                           std::to_string(c.n_layer) + ")");
    for (int i = 0; i < c.n_layer; ++i) g.recurrent.push_back((*flags)[i] != 0);
  } else {
    int interval = 0;
    if (!(s = read_dim(f, p + "full_attention_interval", 4, 1, 4096, interval)).ok()) return s;
    for (int i = 0; i < c.n_layer; ++i) g.recurrent.push_back((i + 1) % interval != 0);
  }

  if (c.arch == Architecture::kQwen3Next) {
    g.grouped_heads = true;
    return read_attention_scale(f, p, c);
  }
  auto sections = f.get_int_array(p + "rope.dimension_sections");
  if (!sections.ok()) return sections.status();
  if (sections->size() < 4)
    return Status::error(p + "rope.dimension_sections: " + std::to_string(sections->size()) + " values (expected 4)");
  int64_t sum = 0;
  for (int i = 0; i < 4; ++i) {
    const int64_t v = (*sections)[i];
    if (v < 0 || v > c.rope_dims / 2)
      return Status::error(p + "rope.dimension_sections: " + std::to_string(v) + " (expected 0.." +
                           std::to_string(c.rope_dims / 2) + ")");
    c.rope_sections[i] = static_cast<int>(v);
    sum += v;
  }
  if (sum == 0 || sum > c.rope_dims / 2)
    return Status::error(p + "rope.dimension_sections: they sum to " + std::to_string(sum) + " (expected 1.." +
                         std::to_string(c.rope_dims / 2) + ", the rotated pairs)");
  return read_attention_scale(f, p, c);
}

}  // namespace

const char* architecture_name(Architecture arch) {
  for (const ArchEntry& e : kArchitectures)
    if (e.arch == arch) return e.gguf_name;
  return "?";
}

// attention.head_count_kv: one count, or (gemma4) one per layer; each
// must divide head_count. n_head_kv is then the largest.
Status read_head_count_kv(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  const std::string key = p + "attention.head_count_kv";
  const gguf::Value* value = f.find(key);
  std::vector<int64_t> counts;
  if (value && value->as_array()) {
    if (!c.is_gemma4()) return Status::error(key + ": an array (expected one integer)");
    auto read = f.get_int_array(key);
    if (!read.ok()) return read.status();
    counts = *read;
    if (static_cast<int>(counts.size()) != c.n_layer)
      return Status::error(key + ": " + std::to_string(counts.size()) + " counts (expected one per layer, " +
                           std::to_string(c.n_layer) + ")");
  } else {
    int count = 0;
    if (Status s = read_dim(f, key, c.n_head, 1, c.n_head, count); !s.ok()) return s;
    counts.push_back(count);
  }
  for (size_t i = 0; i < counts.size(); ++i) {
    const std::string which = value && value->as_array() ? " (layer " + std::to_string(i) + ")" : "";
    if (counts[i] < 1 || counts[i] > c.n_head || c.n_head % counts[i] != 0)
      return Status::error(key + ": " + std::to_string(counts[i]) + which + " does not divide head_count " +
                           std::to_string(c.n_head));
    c.n_head_kv = std::max(c.n_head_kv, static_cast<int>(counts[i]));
  }
  if (counts.size() > 1) c.layer_head_kv.assign(counts.begin(), counts.end());
  return {};
}

Result<ModelConfig> read_model_config(const gguf::GgufFile& f) {
  ModelConfig c;
  auto arch_name = f.get_string("general.architecture");
  if (!arch_name.ok()) return arch_name.status();
  bool known = false;
  for (const ArchEntry& e : kArchitectures)
    if (*arch_name == e.gguf_name) c.arch = e.arch, known = true;
  if (!known)
    return Status::error("general.architecture: '" + *arch_name +
                         "' is not supported (expected llama, qwen2, qwen3, qwen3moe, deepseek2, deepseek4, gemma3, "
                         "gemma4, gpt-oss, qwen35, qwen35moe or qwen3next)");
  c.name = f.get_string("general.name", *arch_name).value();
  const std::string p = *arch_name + ".";

  Status s;
  if (!(s = read_dim(f, p + "embedding_length", 0, 1, kMaxDim, c.n_embd)).ok()) return s;
  if (!(s = read_dim(f, p + "block_count", 0, 1, 4096, c.n_layer)).ok()) return s;
  if (!(s = read_dim(f, p + "nextn_predict_layers", 0, 0, c.n_layer - 1, c.n_nextn_layer)).ok()) return s;
  c.n_layer -= c.n_nextn_layer;
  if (!(s = read_dim(f, p + "attention.head_count", 0, 1, 4096, c.n_head)).ok()) return s;
  if (!(s = read_head_count_kv(f, p, c)).ok()) return s;
  const int default_head_dim = c.n_embd % c.n_head == 0 ? c.n_embd / c.n_head : 0;
  if (!(s = read_dim(f, p + "attention.key_length", default_head_dim, 2, 4096, c.head_dim_k)).ok()) return s;
  if (!(s = read_dim(f, p + "attention.value_length", c.head_dim_k, 1, 4096, c.head_dim_v)).ok()) return s;
  if (c.head_dim_k % 2 != 0) return Status::error(p + "attention.key_length: must be even for RoPE");
  if (!(s = read_dim(f, p + "context_length", 4096, 1, 1 << 24, c.n_ctx_train)).ok()) return s;

  auto eps = f.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5);
  if (!eps.ok()) return eps.status();
  if (!(*eps > 0 && *eps < 1)) return Status::error(p + "attention.layer_norm_rms_epsilon: expected a value in (0, 1)");
  c.rms_eps = static_cast<float>(*eps);

  auto base = f.get_float(p + "rope.freq_base", 10000.0);
  if (!base.ok()) return base.status();
  if (!(*base > 1)) return Status::error(p + "rope.freq_base: expected a value above 1");
  c.rope_base = static_cast<float>(*base);
  if (!(s = read_dim(f, p + "rope.dimension_count", c.head_dim_k, 2, c.head_dim_k, c.rope_dims)).ok()) return s;

  // A factor without a type is linear scaling, as llama.cpp reads it.
  const bool has_factor = f.find(p + "rope.scaling.factor") != nullptr;
  auto scaling = f.get_string(p + "rope.scaling.type", has_factor ? "linear" : "none");
  if (!scaling.ok()) return scaling.status();
  if (*scaling == "linear" || *scaling == "yarn") {
    float factor = 1;
    if (!(s = read_float(f, p + "rope.scaling.factor", 1.0, 1.0, 1e6, factor)).ok()) return s;
    c.rope_freq_scale = 1.0f / factor;
  } else if (*scaling != "none") {
    // Llama 3 scaling needs no metadata: it arrives as the rope_freqs tensor.
    return Status::error(p + "rope.scaling.type: '" + *scaling +
                         "' is not supported (expected none, linear or yarn)");
  }
  if (*scaling == "yarn") {
    Yarn& y = c.yarn;
    c.rope_yarn = true;
    if (!(s = read_dim(f, p + "rope.scaling.original_context_length", c.n_ctx_train, 1, 1 << 24, y.n_ctx_orig)).ok())
      return s;
    if (!(s = read_float(f, p + "rope.scaling.yarn_log_multiplier", 0.0, 0.0, 100.0, y.log_multiplier)).ok()) return s;
    if (!(s = read_float(f, p + "rope.scaling.attn_factor", 1.0, 1e-3, 1e3, y.attn_factor)).ok()) return s;
    if (!(s = read_float(f, p + "rope.scaling.yarn_beta_fast", 32.0, 1e-3, 1e6, y.beta_fast)).ok()) return s;
    if (!(s = read_float(f, p + "rope.scaling.yarn_beta_slow", 1.0, 1e-3, 1e6, y.beta_slow)).ok()) return s;
  }

  const bool adjacent =
      c.arch == Architecture::kLlama || c.arch == Architecture::kDeepseek2 || c.arch == Architecture::kDeepseek4;
  c.rope_layout = adjacent ? RopeLayout::kAdjacent : RopeLayout::kNeox;
  c.has_qkv_bias = c.arch == Architecture::kQwen2;
  c.has_qk_norm = c.arch == Architecture::kQwen3 || c.arch == Architecture::kQwen3Moe || c.arch == Architecture::kGemma3 || c.arch == Architecture::kGemma4;

  if (c.arch == Architecture::kGemma3 && !(s = read_gemma3(f, p, c)).ok()) return s;
  if (c.arch == Architecture::kGemma4 && !(s = read_gemma4(f, p, c)).ok()) return s;
  if (c.arch == Architecture::kGptOss && !(s = read_gpt_oss(f, p, c)).ok()) return s;
  if (c.is_hybrid() && !(s = read_qwen35(f, p, c)).ok()) return s;

  if (c.arch == Architecture::kDeepseek2 && !(s = read_mla(f, p, c)).ok()) return s;
  if (c.arch == Architecture::kDeepseek4 && !(s = read_deepseek4(f, p, c)).ok()) return s;
  const bool moe = c.arch == Architecture::kQwen3Moe || c.arch == Architecture::kDeepseek4 ||
                   c.arch == Architecture::kGptOss || c.arch == Architecture::kQwen35Moe ||
                   c.arch == Architecture::kQwen3Next ||
                   ((c.arch == Architecture::kDeepseek2 || c.is_gemma4()) && f.find(p + "expert_count"));
  if (moe && !(s = read_experts(f, p, c)).ok()) return s;
  // Dense layers: all of them, or DeepSeek's leading ones; gemma4's
  // experts run beside a dense FFN.
  if ((!moe || c.n_layer_dense_lead > 0 || c.is_gemma4()) &&
      !(s = read_dims_per_layer(f, p + "feed_forward_length", c.n_layer + c.n_nextn_layer, 1, kMaxDim, c.n_ff,
                               c.ff_widths)).ok())
    return s;
  return c;
}

}  // namespace revis
