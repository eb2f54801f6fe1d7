#include "tools/synthetic.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"

namespace revis {
namespace {

struct Preset {
  const char* name;
  SyntheticSpec spec;
};

SyntheticSpec make(const char* arch, const char* name, int embd, int layers, int heads, int kv_heads, int head_dim,
                   int ff, int vocab, float rope_base, bool tied) {
  SyntheticSpec s;
  s.arch = arch;
  s.name = name;
  s.n_embd = embd;
  s.n_layer = layers;
  s.n_head = heads;
  s.n_head_kv = kv_heads;
  s.head_dim = head_dim;
  s.n_ff = ff;
  s.n_vocab = vocab;
  s.rope_base = rope_base;
  s.tied_output = tied;
  return s;
}

std::vector<Preset> presets() {
  SyntheticSpec moe = make("qwen3moe", "qwen3-30b-a3b", 2048, 48, 32, 4, 128, 0, 151936, 1e6f, false);
  moe.n_expert = 128;
  moe.n_expert_used = 8;
  moe.n_ff_expert = 768;
  // DeepSeek-V2-Lite: 27 layers (the first dense), 64 experts (6 used, 2
  // shared), latent attention without a query bottleneck; ~16B.
  const SyntheticSpec v2_lite{.arch = "deepseek2", .name = "deepseek-v2-lite", .n_embd = 2048, .n_layer = 27,
                              .n_head = 16, .head_dim = 128, .n_ff = 10944, .n_expert = 64, .n_expert_used = 6,
                              .n_ff_expert = 1408, .kv_lora_rank = 512, .rope_dim = 64, .head_dim_v = 128,
                              .n_expert_shared = 2, .vocab_from = {}, .n_vocab = 102400};
  // A smaller V3: query bottleneck, sigmoid router with a bias, expert
  // groups, weights scaled; ~1.4B.
  const SyntheticSpec v3_small{.arch = "deepseek2", .name = "deepseek-v3-small", .n_embd = 1024, .n_layer = 12,
                               .n_head = 16, .head_dim = 64, .n_ff = 2816, .n_expert = 32, .n_expert_used = 4,
                               .n_ff_expert = 512, .q_lora_rank = 384, .kv_lora_rank = 256, .rope_dim = 32,
                               .head_dim_v = 64, .n_expert_shared = 1, .n_expert_groups = 4, .n_expert_groups_used = 2,
                               .sigmoid_gating = true, .expert_weights_scale = 2.5f, .vocab_from = {},
                               .n_vocab = 32000};
  // DeepSeek V4 Flash's layout in miniature (../shared/testdata/deepseek4's
  // shape): raw, x4-with-indexer and x128 blocks, 8 experts (2 used, 1
  // shared); a few MB.
  const SyntheticSpec v4_tiny{.arch = "deepseek4", .name = "deepseek-v4-tiny", .n_embd = 256, .n_layer = 5,
                              .n_head = 4, .head_dim = 64, .n_expert = 8, .n_expert_used = 2, .n_ff_expert = 256,
                              .q_lora_rank = 96, .rope_dim = 16, .n_expert_shared = 1,
                              .expert_weights_scale = 2.5f, .vocab_from = {}, .n_vocab = 1024};
  // DeepSeek V4 Flash (284B, ~13B active per token), as its published
  // config.json gives it (huggingface.co/deepseek-ai/DeepSeek-V4-Flash,
  // quoted whole in alibaba/rtp-llm's deepseek_v4 tests, and summed to
  // 284.44B / 13.90B active in yzlnew/infra-skills' diagram of it), mapped
  // to GGUF keys as llama.cpp's conversion/deepseek.py does:
  //   hidden_size 4096, num_hidden_layers 43, vocab_size 129280;
  //   num_attention_heads 64, head_dim 512 (one key-value head),
  //   q_lora_rank 1024, qk_rope_head_dim 64, rope_theta 10000, YaRN factor
  //   16 over original_max_position_embeddings 65536, max_position_embeddings
  //   1048576 (context_length), sliding_window 128;
  //   compress_ratios 0, 0, then 4 and 128 alternating (ds4_raw_layers 2),
  //   compress_rope_theta 160000 (written for every deepseek4 file);
  //   index_n_heads 64, index_head_dim 128, index_topk 512;
  //   o_groups 8, o_lora_rank 1024;
  //   n_routed_experts 256, num_experts_per_tok 6, moe_intermediate_size
  //   2048, n_shared_experts 1, routed_scaling_factor 1.5, scoring
  //   sqrtsoftplus, norm_topk_prob, swiglu_limit 10, num_hash_layers 3;
  //   hc_mult 4, hc_sinkhorn_iters 20, hc_eps 1e-6, rms_norm_eps 1e-6
  //   (fixed for every deepseek4 file, as below).
  // Its one multi-token-prediction block is left out, as llama.cpp's
  // converter leaves it out by default. The vocabulary is the built-in
  // byte one padded to V4's size.
  const SyntheticSpec v4_flash{.arch = "deepseek4", .name = "deepseek-v4-flash", .n_embd = 4096, .n_layer = 43,
                               .n_head = 64, .head_dim = 512, .n_expert = 256, .n_expert_used = 6,
                               .n_ff_expert = 2048, .q_lora_rank = 1024, .rope_dim = 64, .n_expert_shared = 1,
                               .expert_weights_scale = 1.5f, .ds4_raw_layers = 2, .indexer_heads = 64,
                               .indexer_dim = 128, .indexer_top_k = 512, .out_groups = 8, .out_rank = 1024,
                               .hash_layers = 3, .n_ctx = 1048576, .sliding_window = 128, .rope_scale = 16.0f,
                               .yarn_original_context = 65536, .vocab_from = {}, .n_vocab = 129280};
  // Miniatures of the mixtures of experts, for `--arch NAME` alone: two
  // blocks (deepseek2's first dense, as its real ones), 8 experts, 2 used.
  SyntheticSpec qwen3moe_tiny = make("qwen3moe", "qwen3moe-tiny", 256, 2, 4, 2, 64, 0, 0, 1e6f, true);
  qwen3moe_tiny.n_expert = 8;
  qwen3moe_tiny.n_expert_used = 2;
  qwen3moe_tiny.n_ff_expert = 256;
  const SyntheticSpec deepseek2_tiny{.arch = "deepseek2", .name = "deepseek2-tiny", .n_embd = 256, .n_layer = 2,
                                     .n_head = 4, .head_dim = 64, .n_ff = 768, .n_expert = 8, .n_expert_used = 2,
                                     .n_ff_expert = 256, .kv_lora_rank = 128, .rope_dim = 32, .head_dim_v = 64,
                                     .n_expert_shared = 1, .vocab_from = {}, .n_vocab = 0};
  // Gemma 3 4B: 34 layers, 5 local (window 1024, base 10000) to each
  // global one (base 1e6, linear scaling by 8), head width 256 (8 heads of
  // 256 over a width of 2560), tied output.
  SyntheticSpec gemma3_4b = make("gemma3", "gemma-3-4b", 2560, 34, 8, 4, 256, 10240, 262144, 1e6f, true);
  gemma3_4b.n_ctx = 131072;
  gemma3_4b.sliding_window = 1024;
  gemma3_4b.rope_scale = 8.0f;
  // Its miniature: both kinds of layer, a window shorter than a long prompt.
  SyntheticSpec gemma3_small = make("gemma3", "gemma3-small", 128, 6, 4, 2, 64, 384, 0, 1e6f, true);
  gemma3_small.n_ctx = 8192;
  gemma3_small.sliding_window = 32;
  gemma3_small.rope_scale = 8.0f;
  // Gemma 4's layout in miniature: local, local, global, then the same
  // three reading the caches of layers 1 and 2; per-layer embeddings.
  SyntheticSpec gemma4_small = make("gemma4", "gemma4-small", 128, 6, 4, 2, 64, 384, 0, 1e6f, true);
  gemma4_small.n_ctx = 8192;
  gemma4_small.sliding_window = 32;
  gemma4_small.sliding_pattern = 3;
  gemma4_small.n_embd_per_layer = 32;
  gemma4_small.shared_kv_layers = 3;
  // Gemma 4's published shapes. The numbers are those of each model's
  // config.json on Hugging Face (google/gemma-4-E2B, -E4B, -26B-A4B, -31B;
  // read from copies quoted in public code, found with the search tool),
  // the layer counts as llama.cpp's src/models/gemma4.cpp tells the four
  // apart (35, 42, 30, 60); the keys and tensors they become are those of
  // llama.cpp's conversion/gemma.py (Gemma4Model): key_length the global
  // head width, key_length_swa the local one, head_count_kv per layer where
  // the global layers have their own count, feed_forward_length per layer
  // where the shared-cache layers are double-wide, rope_freqs turning a
  // quarter of the global pairs. All: logits soft-capped at 30, RoPE base
  // 1e6 global and 10000 local, a vocabulary of 262144, tied output, local
  // heads of 256 and global ones of 512.
  // E2B: width 1536, 35 layers (4 local of window 512 to each global), 8
  // query heads and 1 KV head, FFN 6144 (12288 in the 20 layers that read
  // earlier caches), per-layer embeddings of 256.
  const SyntheticSpec gemma4_e2b{
      .arch = "gemma4", .name = "gemma-4-e2b", .n_embd = 1536, .n_layer = 35, .n_head = 8, .n_head_kv = 1,
      .head_dim = 256, .n_ff = 6144, .n_ctx = 131072, .rope_base = 1e6f, .sliding_window = 512,
      .sliding_pattern = 5, .logit_softcap = 30.0f, .tied_output = true, .n_embd_per_layer = 256,
      .shared_kv_layers = 20, .head_dim_global = 512, .double_wide_shared_ffn = true, .global_rope_share = 0.25f,
      .vocab_from = {}, .n_vocab = 262144};
  // E4B: width 2560, 42 layers (5 local of window 512 to each global), 8
  // query heads and 2 KV heads, FFN 10240, 18 layers reading earlier
  // caches, per-layer embeddings of 256.
  const SyntheticSpec gemma4_e4b{
      .arch = "gemma4", .name = "gemma-4-e4b", .n_embd = 2560, .n_layer = 42, .n_head = 8, .n_head_kv = 2,
      .head_dim = 256, .n_ff = 10240, .n_ctx = 131072, .rope_base = 1e6f, .sliding_window = 512,
      .sliding_pattern = 6, .logit_softcap = 30.0f, .tied_output = true, .n_embd_per_layer = 256,
      .shared_kv_layers = 18, .head_dim_global = 512, .global_rope_share = 0.25f, .vocab_from = {}, .n_vocab = 262144};
  // 26B-A4B: width 2816, 30 layers (5 local of window 1024 to each global),
  // 16 query heads, 8 KV heads local and 2 global, whose keys serve as
  // values (no attn_v); a dense FFN of 2112 beside 128 experts of 704 (8
  // used), their gate and up fused (ffn_gate_up_exps).
  const SyntheticSpec gemma4_26b{
      .arch = "gemma4", .name = "gemma-4-26b-a4b", .n_embd = 2816, .n_layer = 30, .n_head = 16, .n_head_kv = 8,
      .head_dim = 256, .n_ff = 2112, .n_expert = 128, .n_expert_used = 8, .n_ff_expert = 704, .n_ctx = 262144,
      .rope_base = 1e6f, .sliding_window = 1024, .sliding_pattern = 6, .logit_softcap = 30.0f, .tied_output = true,
      .fused_gate_up_exps = true, .head_dim_global = 512, .n_head_kv_global = 2, .global_k_eq_v = true,
      .global_rope_share = 0.25f, .vocab_from = {}, .n_vocab = 262144};
  // 31B: the same layout at width 5376 and 60 layers, 32 query heads, 16
  // KV heads local and 4 global, a dense FFN of 21504.
  const SyntheticSpec gemma4_31b{
      .arch = "gemma4", .name = "gemma-4-31b", .n_embd = 5376, .n_layer = 60, .n_head = 32, .n_head_kv = 16,
      .head_dim = 256, .n_ff = 21504, .n_ctx = 262144, .rope_base = 1e6f, .sliding_window = 1024,
      .sliding_pattern = 6, .logit_softcap = 30.0f, .tied_output = true, .head_dim_global = 512,
      .n_head_kv_global = 4, .global_k_eq_v = true, .global_rope_share = 0.25f, .vocab_from = {}, .n_vocab = 262144};
  // gpt-oss-20b: 24 layers alternating a window of 128 and global, YaRN x32
  // over 4096, 32 experts (4 used) of 2880, 64 query heads and 8 KV heads
  // of 64 over a width of 2880.
  SyntheticSpec gpt_oss_20b = make("gpt-oss", "gpt-oss-20b", 2880, 24, 64, 8, 64, 0, 201088, 150000.f, false);
  gpt_oss_20b.n_ctx = 131072;
  gpt_oss_20b.sliding_window = 128;
  gpt_oss_20b.rope_scale = 32.0f;
  gpt_oss_20b.n_expert = 32;
  gpt_oss_20b.n_expert_used = 4;
  gpt_oss_20b.n_ff_expert = 2880;
  // Its miniature: four layers, a window shorter than a long prompt, 8
  // experts (4 used), rows of whole MXFP4 blocks.
  SyntheticSpec gpt_oss_tiny = gpt_oss_20b;
  gpt_oss_tiny.name = "gpt-oss-tiny";
  gpt_oss_tiny.n_embd = 128;
  gpt_oss_tiny.n_layer = 4;
  gpt_oss_tiny.n_head = 4;
  gpt_oss_tiny.n_head_kv = 2;
  gpt_oss_tiny.n_vocab = 0;
  gpt_oss_tiny.sliding_window = 32;
  gpt_oss_tiny.n_expert = 8;
  gpt_oss_tiny.n_ff_expert = 128;
  // Qwen3.5 9B: 32 layers, every fourth full attention (16 query heads and 4
  // KV heads of 256, a quarter of each rotating in M-RoPE sections 11, 11,
  // 10), the others gated delta-nets of 16 key and 32 value heads of 128.
  SyntheticSpec qwen35_9b = make("qwen35", "qwen3.5-9b", 4096, 32, 16, 4, 256, 12288, 248320, 1e7f, false);
  qwen35_9b.n_ctx = 262144;
  qwen35_9b.rope_dim = 64;
  qwen35_9b.rope_sections = {11, 11, 10, 0};
  qwen35_9b.ssm_head_dim = 128;
  qwen35_9b.ssm_k_heads = 16;
  qwen35_9b.ssm_v_heads = 32;
  // Its miniature: three delta-net layers and one attention, two value
  // heads per key head, and sections that leave a pair still.
  SyntheticSpec qwen35_tiny = make("qwen35", "qwen35-tiny", 128, 4, 4, 2, 64, 384, 0, 1e7f, false);
  qwen35_tiny.rope_dim = 16;
  qwen35_tiny.rope_sections = {3, 2, 2, 1};
  qwen35_tiny.ssm_head_dim = 32;
  qwen35_tiny.ssm_k_heads = 2;
  qwen35_tiny.ssm_v_heads = 4;
  // The mixture of experts in miniature: the same layers, each FFN 8
  // experts (2 used) of 128 beside a gated shared expert of 128.
  SyntheticSpec qwen35moe_tiny = qwen35_tiny;
  qwen35moe_tiny.arch = "qwen35moe";
  qwen35moe_tiny.name = "qwen35moe-tiny";
  qwen35moe_tiny.n_ff = 128;
  qwen35moe_tiny.n_expert = 8;
  qwen35moe_tiny.n_expert_used = 2;
  qwen35moe_tiny.n_ff_expert = 128;
  // Qwen3-Next's layout in miniature: the same, its projections fused per
  // key head, RoPE without sections.
  SyntheticSpec qwen3next_tiny = qwen35moe_tiny;
  qwen3next_tiny.arch = "qwen3next";
  qwen3next_tiny.name = "qwen3next-tiny";
  qwen3next_tiny.rope_sections.clear();
  return {
      {"tiny", make("qwen3", "revis-tiny", 256, 4, 4, 2, 64, 768, 0, 1e6f, true)},
      {"qwen35-tiny", qwen35_tiny},
      {"qwen35moe-tiny", qwen35moe_tiny},
      {"qwen3next-tiny", qwen3next_tiny},
      {"qwen3.5-9b", qwen35_9b},
      {"gemma3-small", gemma3_small},
      {"gemma4-small", gemma4_small},
      {"qwen3moe-tiny", qwen3moe_tiny},
      {"deepseek2-tiny", deepseek2_tiny},
      {"gpt-oss-tiny", gpt_oss_tiny},
      {"gemma-3-4b", gemma3_4b},
      {"gemma-4-e2b", gemma4_e2b},
      {"gemma-4-e4b", gemma4_e4b},
      {"gemma-4-26b-a4b", gemma4_26b},
      {"gemma-4-31b", gemma4_31b},
      {"gpt-oss-20b", gpt_oss_20b},
      {"llama-3.2-1b", make("llama", "llama-3.2-1b", 2048, 16, 32, 8, 64, 8192, 128256, 500000.f, true)},
      {"llama-3.1-8b", make("llama", "llama-3.1-8b", 4096, 32, 32, 8, 128, 14336, 128256, 500000.f, false)},
      {"qwen3-0.6b", make("qwen3", "qwen3-0.6b", 1024, 28, 16, 8, 128, 3072, 151936, 1e6f, true)},
      {"qwen3-4b", make("qwen3", "qwen3-4b", 2560, 36, 32, 8, 128, 9728, 151936, 1e6f, true)},
      {"qwen3-30b-a3b", moe},
      {"deepseek-v2-lite", v2_lite},
      {"deepseek-v3-small", v3_small},
      {"deepseek-v4-flash", v4_flash},
      {"deepseek-v4-tiny", v4_tiny},
  };
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t hash_name(const std::string& name, uint64_t seed) {
  uint64_t h = seed ^ 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Gaussian values for one row, from a generator seeded by (tensor, row) so
// rows can be produced in parallel and in any order.
void fill_gaussian(float* out, int64_t n, uint64_t seed, float stddev) {
  uint64_t state = seed;
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1)) * stddev;
    out[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
  }
}

// GPT-2's printable stand-ins for bytes, so a byte-level BPE vocabulary can
// hold every byte as a token.
std::string byte_token(int b) {
  int code = b;
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  if (!printable) {
    int shifted = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) ++shifted;
    code = 256 + shifted;
  }
  std::string s;
  if (code < 0x80) {
    s += static_cast<char>(code);
  } else {
    s += static_cast<char>(0xC0 | (code >> 6));
    s += static_cast<char>(0x80 | (code & 0x3F));
  }
  return s;
}

Status write_vocabulary(const SyntheticSpec& spec, gguf::GgufWriter& out, int& n_vocab) {
  if (!spec.vocab_from.empty()) {
    auto vocab = gguf::GgufFile::open(spec.vocab_from);
    if (!vocab.ok()) return vocab.status();
    for (const gguf::KeyValue& kv : (*vocab)->metadata())
      if (kv.key.rfind("tokenizer.", 0) == 0) out.set(kv.key, kv.value);
    auto tokens = (*vocab)->get_string_array("tokenizer.ggml.tokens");
    if (!tokens.ok()) return tokens.status();
    if (tokens->empty()) return Status::error(spec.vocab_from + ": tokenizer.ggml.tokens is missing or empty");
    n_vocab = static_cast<int>(tokens->size());
    return {};
  }
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_token(b)), types.push_back(1);
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) tokens.push_back(special), types.push_back(3);
  for (int i = static_cast<int>(tokens.size()); i < spec.n_vocab; ++i)
    tokens.push_back("<|unused_" + std::to_string(i) + "|>"), types.push_back(5);
  n_vocab = static_cast<int>(tokens.size());
  out.set_string("tokenizer.ggml.model", "gpt2");
  out.set_string("tokenizer.ggml.pre", "qwen2");
  out.set_string_array("tokenizer.ggml.tokens", tokens);
  out.set_i32_array("tokenizer.ggml.token_type", types);
  out.set_string_array("tokenizer.ggml.merges", {});
  out.set_u32("tokenizer.ggml.eos_token_id", 258);  // <|im_end|>
  out.set_u32("tokenizer.ggml.padding_token_id", 256);
  out.set_bool("tokenizer.ggml.add_bos_token", false);
  return {};
}

// deepseek2's attention tensors (model/config.h's Mla).
void add_latent_attention(const SyntheticSpec& spec, const std::string& p, int64_t head_dim,
                          std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  const int64_t d = spec.n_embd, heads = spec.n_head, latent = spec.kv_lora_rank;
  const int64_t q = heads * (head_dim + spec.rope_dim);
  if (spec.q_lora_rank > 0) {
    tensors.push_back({p + "attn_q_a.weight", {d, spec.q_lora_rank}});
    tensors.push_back({p + "attn_q_a_norm.weight", {spec.q_lora_rank}});
    tensors.push_back({p + "attn_q_b.weight", {spec.q_lora_rank, q}});
  } else {
    tensors.push_back({p + "attn_q.weight", {d, q}});
  }
  tensors.push_back({p + "attn_kv_a_mqa.weight", {d, latent + spec.rope_dim}});
  tensors.push_back({p + "attn_kv_a_norm.weight", {latent}});
  tensors.push_back({p + "attn_k_b.weight", {head_dim, latent, heads}});
  tensors.push_back({p + "attn_v_b.weight", {latent, spec.head_dim_v, heads}});
  tensors.push_back({p + "attn_output.weight", {heads * spec.head_dim_v, d}});
}

// deepseek4's shape: the spec's fields with the miniature's defaults
// (synthetic.h) where they are 0. The first raw_layers blocks attend raw,
// the others alternate compression ratios 4 and 128.
struct Deepseek4Shape {
  std::vector<int32_t> ratios;
  int rope_dim, q_lora_rank, out_groups, out_rank, window, top_k, indexer_heads, indexer_dim, hash_layers;
};

Deepseek4Shape deepseek4_shape(const SyntheticSpec& spec, int head_dim) {
  const auto or_default = [](int value, int fallback) { return value > 0 ? value : fallback; };
  Deepseek4Shape s;
  const int raw_layers = or_default(spec.ds4_raw_layers, 1);
  for (int i = 0; i < spec.n_layer; ++i) s.ratios.push_back(i < raw_layers ? 0 : (i - raw_layers) % 2 == 0 ? 4 : 128);
  s.rope_dim = or_default(spec.rope_dim, std::max(2, head_dim / 4 / 2 * 2));
  s.q_lora_rank = or_default(spec.q_lora_rank, spec.n_embd / 2);
  s.out_groups = or_default(spec.out_groups, spec.n_head % 2 == 0 ? 2 : 1);
  s.out_rank = or_default(spec.out_rank, head_dim);
  s.window = or_default(spec.sliding_window, 64);
  s.top_k = or_default(spec.indexer_top_k, 16);
  s.indexer_heads = or_default(spec.indexer_heads, 4);
  s.indexer_dim = or_default(spec.indexer_dim, head_dim);
  s.hash_layers = std::min(spec.n_layer, or_default(spec.hash_layers, 1));
  return s;
}

void write_deepseek4_metadata(const SyntheticSpec& spec, const Deepseek4Shape& s, int head_dim,
                              gguf::GgufWriter& out) {
  const std::string a = "deepseek4.";
  out.set_u32(a + "attention.head_count_kv", 1);
  out.set_u32(a + "attention.key_length", head_dim);
  out.set_u32(a + "attention.value_length", head_dim);
  out.set_u32(a + "rope.dimension_count", s.rope_dim);
  out.set_string(a + "rope.scaling.type", "yarn");
  const bool yarn_given = spec.rope_scale > 0;
  out.set_f32(a + "rope.scaling.factor", yarn_given ? spec.rope_scale : 4.0f);
  out.set_u32(a + "rope.scaling.original_context_length",
              yarn_given ? spec.yarn_original_context : std::max(1, spec.n_ctx / 4));
  out.set_u32(a + "attention.q_lora_rank", s.q_lora_rank);
  out.set_u32(a + "attention.sliding_window", s.window);
  out.set_u32(a + "expert_shared_count", spec.n_expert_shared);
  out.set_f32(a + "expert_weights_scale", spec.expert_weights_scale);
  out.set_bool(a + "expert_weights_norm", true);
  out.set_u32(a + "expert_gating_func", 4);  // sqrt(softplus)
  out.set_f32_array(a + "swiglu_clamp_exp", std::vector<float>(spec.n_layer, 10.0f));
  out.set_u32(a + "attention.indexer.head_count", s.indexer_heads);
  out.set_u32(a + "attention.indexer.key_length", s.indexer_dim);
  out.set_u32(a + "attention.indexer.top_k", s.top_k);
  out.set_u32(a + "attention.output_group_count", s.out_groups);
  out.set_u32(a + "attention.output_lora_rank", s.out_rank);
  out.set_i32_array(a + "attention.compress_ratios", s.ratios);
  out.set_f32(a + "attention.compress_rope_freq_base", 160000.0f);
  out.set_u32(a + "hyper_connection.count", 4);
  out.set_u32(a + "hyper_connection.sinkhorn_iterations", 20);
  out.set_f32(a + "hyper_connection.epsilon", 1e-6f);
  out.set_u32(a + "hash_layer_count", s.hash_layers);
}

// Block p's attention and hyper-connection tensors (model/weights.h's
// Deepseek4Layer); the experts are added as for the other families.
void add_deepseek4_attention(const SyntheticSpec& spec, const Deepseek4Shape& s, int layer, const std::string& p,
                             int64_t head_dim, std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  const int64_t d = spec.n_embd, heads = spec.n_head, n_hc = 4, n_mix = (2 + n_hc) * n_hc;
  for (const char* mix : {"hc_attn", "hc_ffn"}) {
    tensors.push_back({p + mix + "_fn.weight", {n_hc * d, n_mix}});
    tensors.push_back({p + mix + "_base.weight", {n_mix}});
    tensors.push_back({p + mix + "_scale.weight", {3}});
  }
  tensors.push_back({p + "attn_sinks.weight", {heads}});
  tensors.push_back({p + "attn_q_a.weight", {d, s.q_lora_rank}});
  tensors.push_back({p + "attn_q_a_norm.weight", {s.q_lora_rank}});
  tensors.push_back({p + "attn_q_b.weight", {s.q_lora_rank, heads * head_dim}});
  tensors.push_back({p + "attn_kv.weight", {d, head_dim}});
  tensors.push_back({p + "attn_kv_a_norm.weight", {head_dim}});
  tensors.push_back({p + "attn_output_a.weight", {heads * head_dim / s.out_groups, int64_t{s.out_rank} * s.out_groups}});
  tensors.push_back({p + "attn_output_b.weight", {int64_t{s.out_rank} * s.out_groups, d}});
  const int64_t ratio = s.ratios[layer];
  auto compressor = [&](const std::string& prefix, int64_t width) {
    const int64_t state = ratio == 4 ? 2 * width : width;
    tensors.push_back({prefix + "compressor_kv.weight", {d, state}});
    tensors.push_back({prefix + "compressor_gate.weight", {d, state}});
    tensors.push_back({prefix + "compressor_ape.weight", {state, ratio}});
    tensors.push_back({prefix + "compressor_norm.weight", {width}});
  };
  if (ratio != 0) compressor(p + "attn_", head_dim);
  if (ratio == 4) {
    tensors.push_back({p + "indexer.proj.weight", {d, s.indexer_heads}});
    tensors.push_back({p + "indexer.attn_q_b.weight", {s.q_lora_rank, int64_t{s.indexer_heads} * s.indexer_dim}});
    compressor(p + "indexer_", s.indexer_dim);
  }
}

struct PlannedTensor {
  std::string name;
  std::vector<int64_t> dims;  // innermost first
  TensorType type;
};

// A spec's file before its weights: the spec as written (defaults filled
// in), its metadata in `out`, and its tensors with their types.
struct SyntheticPlan {
  SyntheticSpec spec;
  gguf::GgufWriter out;
  std::vector<PlannedTensor> tensors;
};

Status plan_synthetic_model(const SyntheticSpec& given, SyntheticPlan& plan) {
  SyntheticSpec& spec = plan.spec;
  gguf::GgufWriter& out = plan.out;
  spec = given;
  if (spec.arch == "deepseek4") spec.n_expert_shared = std::max(1, spec.n_expert_shared);  // V4 always has one
  const bool deepseek = spec.arch == "deepseek2", deepseek4 = spec.arch == "deepseek4";
  const bool gemma4 = spec.arch == "gemma4", gemma3 = spec.arch == "gemma3" || gemma4;
  const bool gpt_oss = spec.arch == "gpt-oss";
  // qwen3next: qwen35moe's model with fused projections and plain RoPE.
  const bool qwen3next = spec.arch == "qwen3next", qwen35moe = spec.arch == "qwen35moe" || qwen3next;
  const bool qwen35 = spec.arch == "qwen35" || qwen35moe;
  // gemma4's experts run beside a dense FFN of n_ff.
  const bool gemma4_moe = gemma4 && spec.n_expert > 0;
  const bool moe = spec.arch == "qwen3moe" || deepseek || deepseek4 || gpt_oss || qwen35moe || gemma4_moe;
  if (spec.arch != "llama" && spec.arch != "qwen2" && spec.arch != "qwen3" && !moe && !gemma3 && !qwen35)
    return Status::error("arch: '" + spec.arch +
                         "' (expected llama, qwen2, qwen3, qwen3moe, deepseek2, deepseek4, gemma3, gemma4, gpt-oss, "
                         "qwen35, qwen35moe or qwen3next)");
  if (qwen35 && (spec.full_attention_interval <= 0 || spec.conv_kernel <= 0 || spec.ssm_head_dim <= 0 ||
                 spec.ssm_k_heads <= 0 || spec.ssm_v_heads % spec.ssm_k_heads != 0 || spec.rope_dim <= 0 ||
                 (!qwen3next && spec.rope_sections.size() != 4)))
    return Status::error("qwen35 needs an attention interval, a conv kernel, delta-net heads (key heads dividing "
                         "value heads), a rope dim and four rope sections");
  if (gpt_oss && (spec.sliding_window <= 0 || spec.rope_scale < 1 || spec.yarn_original_context <= 0))
    return Status::error(
        "gpt-oss needs a positive sliding window, a YaRN factor of at least 1 and its original context");
  if (gemma3 && (spec.sliding_window <= 0 || spec.sliding_pattern <= 0 || spec.rope_scale < 0 || spec.logit_softcap < 0))
    return Status::error("gemma3 needs a positive sliding window and pattern (rope scale and soft cap 0 or positive)");
  // gemma4's shared layers read the last local and global layer before them.
  const int first_shared = spec.n_layer - spec.shared_kv_layers;
  auto local = [&](int layer) { return layer % spec.sliding_pattern < spec.sliding_pattern - 1; };
  if (gemma4 && (spec.n_embd_per_layer < 0 || spec.shared_kv_layers < 0 || first_shared < 0 ||
                 (spec.shared_kv_layers > 0 && (first_shared < 2 || !local(first_shared - 2) || local(first_shared - 1)))))
    return Status::error("gemma4 needs per-layer embeddings of 0 or more and shared layers after a local and a global "
                         "layer (" + std::to_string(spec.shared_kv_layers) + " of " + std::to_string(spec.n_layer) +
                         " layers with every " + std::to_string(spec.sliding_pattern) + "th global)");
  if (spec.n_embd <= 0 || spec.n_layer <= 0 || spec.n_head <= 0 || spec.n_head_kv <= 0 ||
      spec.n_head % spec.n_head_kv != 0)
    return Status::error("dimensions: embd, layers, heads must be positive and kv-heads must divide heads");
  if (moe && (spec.n_expert <= 0 || spec.n_expert_used <= 0 || spec.n_expert_used > spec.n_expert || spec.n_ff_expert <= 0))
    return Status::error(spec.arch + " needs --experts, --experts-used (<= experts) and --ff-expert");
  if ((!moe || deepseek || gemma4) && spec.n_ff <= 0) return Status::error("ff: must be positive");
  if (spec.fused_gate_up_exps && !gemma4_moe)
    return Status::error("fused gate and up experts: only gemma4 with --experts writes them");
  const int head_dim = spec.head_dim > 0 ? spec.head_dim : spec.n_embd / spec.n_head;
  if (head_dim <= 0 || head_dim % 2 != 0) return Status::error("head dim: must be positive and even");
  // gemma4: the global and local layers' own head widths and KV heads,
  // the shared layers' FFN width (0 or false: as the others).
  const int global_head_dim = gemma4 && spec.head_dim_global > 0 ? spec.head_dim_global : head_dim;
  const int local_head_dim = gemma4 && spec.head_dim_swa > 0 ? spec.head_dim_swa : head_dim;
  if (global_head_dim % 2 != 0 || local_head_dim % 2 != 0) return Status::error("global and local head dims: must be even");
  if (gemma4 && spec.n_head_kv_global > 0 && spec.n_head % spec.n_head_kv_global != 0)
    return Status::error("global kv-heads must divide heads");
  if ((spec.head_dim_global > 0 || spec.head_dim_swa > 0 || spec.n_head_kv_global > 0 || !spec.layer_kv_heads.empty() ||
       spec.global_k_eq_v || spec.double_wide_shared_ffn) &&
      !gemma4)
    return Status::error("global and local head widths, per-layer kv-heads, k = v and double-wide FFNs: gemma4 only");
  if (!spec.layer_kv_heads.empty() && static_cast<int>(spec.layer_kv_heads.size()) != spec.n_layer)
    return Status::error("layer kv heads: " + std::to_string(spec.layer_kv_heads.size()) +
                         " counts (expected one per layer, " + std::to_string(spec.n_layer) + ")");
  for (int heads : spec.layer_kv_heads)
    if (heads <= 0 || spec.n_head % heads != 0)
      return Status::error("layer kv heads: " + std::to_string(heads) + " does not divide the " +
                           std::to_string(spec.n_head) + " heads");
  auto head_dim_of = [&](int layer) {
    return int64_t{!gemma4 ? head_dim : local(layer) ? local_head_dim : global_head_dim};
  };
  auto kv_heads_of = [&](int layer) {
    if (!spec.layer_kv_heads.empty() && layer < spec.n_layer) return int64_t{spec.layer_kv_heads[layer]};
    return int64_t{gemma4 && !local(layer) && spec.n_head_kv_global > 0 ? spec.n_head_kv_global : spec.n_head_kv};
  };
  auto ff_of = [&](int layer) {
    return int64_t{spec.n_ff} * (gemma4 && spec.double_wide_shared_ffn && layer >= first_shared ? 2 : 1);
  };
  if (deepseek && (spec.kv_lora_rank <= 0 || spec.rope_dim <= 0 || spec.rope_dim % 2 != 0 || spec.head_dim_v <= 0 ||
                   spec.q_lora_rank < 0 || spec.n_layer_dense_lead < 0 || spec.n_layer_dense_lead > spec.n_layer))
    return Status::error("deepseek2 needs a kv-lora rank, an even rope dim, a value dim and at most layers dense layers");
  if (spec.n_nextn_layer < 0 || (spec.n_nextn_layer > 0 && !deepseek && spec.arch != "qwen35" && spec.arch != "qwen35moe"))
    return Status::error("nextn layers: only deepseek2, qwen35 and qwen35moe have multi-token-prediction blocks");
  const int n_blocks = spec.n_layer + spec.n_nextn_layer;
  const Deepseek4Shape ds4 = deepseek4_shape(spec, head_dim);
  if (deepseek4 && (spec.n_head % ds4.out_groups != 0 || ds4.indexer_dim < ds4.rope_dim || ds4.rope_dim % 2 != 0 ||
                    ds4.rope_dim > head_dim || ds4.top_k > std::max(1, spec.n_ctx / 4)))
    return Status::error(
        "deepseek4 needs output groups that divide the heads, an even rope dim within the head and the indexer's "
        "keys, and indexer picks within a quarter of the context");

  const std::string a = spec.arch + ".";
  out.set_string("general.architecture", spec.arch);
  out.set_string("general.name", spec.name);
  out.set_u32(a + "context_length", spec.n_ctx);
  out.set_u32(a + "embedding_length", spec.n_embd);
  out.set_u32(a + "block_count", n_blocks);
  if (gemma4 && spec.double_wide_shared_ffn && spec.shared_kv_layers > 0) {
    std::vector<int32_t> widths;
    for (int i = 0; i < spec.n_layer; ++i) widths.push_back(static_cast<int32_t>(ff_of(i)));
    out.set_i32_array(a + "feed_forward_length", widths);
  } else {
    out.set_u32(a + "feed_forward_length", moe && !deepseek && !gemma4 ? spec.n_ff_expert : spec.n_ff);
  }
  out.set_u32(a + "attention.head_count", spec.n_head);
  out.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  out.set_f32(a + "rope.freq_base", spec.rope_base);
  if (deepseek) {
    // The cache's row (latent + RoPE key, one KV head), then the heads'.
    out.set_u32(a + "attention.head_count_kv", 1);
    out.set_u32(a + "attention.key_length", spec.kv_lora_rank + spec.rope_dim);
    out.set_u32(a + "attention.value_length", spec.kv_lora_rank);
    out.set_u32(a + "attention.key_length_mla", head_dim + spec.rope_dim);
    out.set_u32(a + "attention.value_length_mla", spec.head_dim_v);
    out.set_u32(a + "rope.dimension_count", spec.rope_dim);
    // 0 without a low-rank query, as DeepSeek-V2-Lite's files say (llama.cpp
    // requires the key).
    out.set_u32(a + "attention.q_lora_rank", spec.q_lora_rank);
    out.set_u32(a + "attention.kv_lora_rank", spec.kv_lora_rank);
    out.set_u32(a + "leading_dense_block_count", spec.n_layer_dense_lead);
    if (spec.n_nextn_layer > 0) out.set_u32(a + "nextn_predict_layers", spec.n_nextn_layer);
    out.set_u32(a + "expert_shared_count", spec.n_expert_shared);
    out.set_f32(a + "expert_weights_scale", spec.expert_weights_scale);
    out.set_bool(a + "expert_weights_norm", spec.sigmoid_gating);
    out.set_u32(a + "expert_gating_func", spec.sigmoid_gating ? 2 : 1);
    if (spec.n_expert_groups > 0) {
      out.set_u32(a + "expert_group_count", spec.n_expert_groups);
      out.set_u32(a + "expert_group_used_count", spec.n_expert_groups_used);
    }
  } else if (deepseek4) {
    write_deepseek4_metadata(spec, ds4, head_dim, out);
  } else if (gemma4 && ((spec.n_head_kv_global > 0 && spec.n_head_kv_global != spec.n_head_kv) ||
                         !spec.layer_kv_heads.empty())) {
    std::vector<int32_t> heads;
    for (int i = 0; i < spec.n_layer; ++i) heads.push_back(static_cast<int32_t>(kv_heads_of(i)));
    out.set_i32_array(a + "attention.head_count_kv", heads);
    out.set_u32(a + "attention.key_length", global_head_dim);
    out.set_u32(a + "attention.value_length", global_head_dim);
  } else {
    out.set_u32(a + "attention.head_count_kv", spec.n_head_kv);
    out.set_u32(a + "attention.key_length", gemma4 ? global_head_dim : head_dim);
    out.set_u32(a + "attention.value_length", gemma4 ? global_head_dim : head_dim);
  }
  if (gemma4) {
    std::vector<int32_t> flags;
    for (int i = 0; i < spec.n_layer; ++i) flags.push_back(local(i) ? 1 : 0);
    out.set_i32_array(a + "attention.sliding_window_pattern", flags);
    out.set_u32(a + "attention.key_length_swa", local_head_dim);
    out.set_u32(a + "attention.value_length_swa", local_head_dim);
    if (global_head_dim != local_head_dim) {
      out.set_u32(a + "rope.dimension_count", global_head_dim);
      out.set_u32(a + "rope.dimension_count_swa", local_head_dim);
    }
    out.set_u32(a + "embedding_length_per_layer_input", spec.n_embd_per_layer);
    out.set_u32(a + "attention.shared_kv_layers", spec.shared_kv_layers);
  } else if (gemma3) {
    out.set_u32(a + "attention.sliding_window_pattern", spec.sliding_pattern);
  }
  if (gemma3) {
    out.set_u32(a + "attention.sliding_window", spec.sliding_window);
    out.set_f32(a + "rope.freq_base_swa", spec.rope_base_swa);
    if (spec.rope_scale > 0) {
      out.set_string(a + "rope.scaling.type", "linear");
      out.set_f32(a + "rope.scaling.factor", spec.rope_scale);
    }
    if (spec.logit_softcap > 0) out.set_f32(a + "final_logit_softcapping", spec.logit_softcap);
  }
  if (qwen35) {
    out.set_u32(a + "rope.dimension_count", spec.rope_dim);
    if (!qwen3next) out.set_i32_array(a + "rope.dimension_sections", spec.rope_sections);
    out.set_u32(a + "full_attention_interval", spec.full_attention_interval);
    out.set_u32(a + "ssm.conv_kernel", spec.conv_kernel);
    out.set_u32(a + "ssm.state_size", spec.ssm_head_dim);
    out.set_u32(a + "ssm.group_count", spec.ssm_k_heads);
    out.set_u32(a + "ssm.time_step_rank", spec.ssm_v_heads);
    out.set_u32(a + "ssm.inner_size", spec.ssm_head_dim * spec.ssm_v_heads);
    if (spec.n_nextn_layer > 0) out.set_u32(a + "nextn_predict_layers", spec.n_nextn_layer);
  }
  // qwen35moe's one shared expert is as wide as the FFN (n_ff).
  if (qwen35moe) out.set_u32(a + "expert_shared_feed_forward_length", spec.n_ff);
  if (gpt_oss) {
    out.set_u32(a + "attention.sliding_window", spec.sliding_window);
    out.set_string(a + "rope.scaling.type", "yarn");
    out.set_f32(a + "rope.scaling.factor", spec.rope_scale);
    out.set_u32(a + "rope.scaling.original_context_length", spec.yarn_original_context);
  }
  if (moe) {
    out.set_u32(a + "expert_count", spec.n_expert);
    out.set_u32(a + "expert_used_count", spec.n_expert_used);
    out.set_u32(a + "expert_feed_forward_length", spec.n_ff_expert);
  }
  out.set_u32("general.file_type", llama_file_type(spec.mix));
  out.set_u32("general.quantization_version", 2);
  int n_vocab = 0;
  if (Status s = write_vocabulary(spec, out, n_vocab); !s.ok()) return s;

  // (name, dims innermost first); 1-D tensors are norms (ones) or biases (zeros).
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
  const int64_t d = spec.n_embd;
  tensors.push_back({"token_embd.weight", {d, n_vocab}});
  tensors.push_back({"output_norm.weight", {d}});
  if (!spec.tied_output) tensors.push_back({"output.weight", {d, n_vocab}});
  const int64_t per_layer = int64_t{spec.n_embd_per_layer} * spec.n_layer;
  if (gemma4) tensors.push_back({"rope_freqs.weight", {global_head_dim / 2}});
  if (gemma4 && per_layer > 0) {
    tensors.push_back({"per_layer_token_embd.weight", {per_layer, n_vocab}});
    tensors.push_back({"per_layer_model_proj.weight", {d, per_layer}});
    tensors.push_back({"per_layer_proj_norm.weight", {spec.n_embd_per_layer}});
  }
  if (deepseek4) {
    tensors.push_back({"output_hc_fn.weight", {4 * d, 4}});
    tensors.push_back({"output_hc_base.weight", {4}});
    tensors.push_back({"output_hc_scale.weight", {1}});
  }
  for (int i = 0; i < n_blocks; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    if (i >= spec.n_layer) {
      tensors.push_back({p + "nextn.eh_proj.weight", {2 * d, d}});
      tensors.push_back({p + "nextn.enorm.weight", {d}});
      tensors.push_back({p + "nextn.hnorm.weight", {d}});
      tensors.push_back({p + "nextn.shared_head_norm.weight", {d}});
    }
    tensors.push_back({p + "attn_norm.weight", {d}});
    const int64_t layer_head_dim = head_dim_of(i), q = int64_t{spec.n_head} * layer_head_dim,
                  kv = kv_heads_of(i) * layer_head_dim;
    // qwen35's MTP block is a full-attention block, whatever the interval.
    const bool recurrent = qwen35 && i < spec.n_layer && (i + 1) % spec.full_attention_interval != 0;
    const bool shared_kv = gemma4 && i >= first_shared;
    if (recurrent) {
      const int64_t hd = spec.ssm_head_dim, heads = spec.ssm_v_heads, value = hd * heads;
      const int64_t channels = 2 * hd * spec.ssm_k_heads + value;
      if (qwen3next) {
        // Per key head [q | k | its value heads' v | their z], and [beta | alpha].
        tensors.push_back({p + "ssm_in.weight", {d, channels + value}});
        tensors.push_back({p + "ssm_ba.weight", {d, 2 * heads}});
      } else {
        tensors.push_back({p + "attn_qkv.weight", {d, channels}});
        tensors.push_back({p + "attn_gate.weight", {d, value}});
        tensors.push_back({p + "ssm_beta.weight", {d, heads}});
        tensors.push_back({p + "ssm_alpha.weight", {d, heads}});
      }
      tensors.push_back({p + "ssm_conv1d.weight", {spec.conv_kernel, channels}});
      tensors.push_back({p + "ssm_dt.bias", {heads}});
      tensors.push_back({p + "ssm_a", {heads}});
      tensors.push_back({p + "ssm_norm.weight", {hd}});
      tensors.push_back({p + "ssm_out.weight", {value, d}});
    } else if (qwen35) {
      // Each query head is followed by its output gate.
      tensors.push_back({p + "attn_q.weight", {d, 2 * q}});
      tensors.push_back({p + "attn_k.weight", {d, kv}});
      tensors.push_back({p + "attn_v.weight", {d, kv}});
      tensors.push_back({p + "attn_output.weight", {q, d}});
    } else if (deepseek) {
      add_latent_attention(spec, p, head_dim, tensors);
    } else if (deepseek4) {
      add_deepseek4_attention(spec, ds4, i, p, head_dim, tensors);
    } else {
      tensors.push_back({p + "attn_q.weight", {d, q}});
      if (!shared_kv) {
        tensors.push_back({p + "attn_k.weight", {d, kv}});
        if (!(spec.global_k_eq_v && !local(i))) tensors.push_back({p + "attn_v.weight", {d, kv}});
      }
      tensors.push_back({p + "attn_output.weight", {q, d}});
    }
    if (spec.arch == "qwen2" || gpt_oss) {
      tensors.push_back({p + "attn_q.bias", {q}});
      tensors.push_back({p + "attn_k.bias", {kv}});
      tensors.push_back({p + "attn_v.bias", {kv}});
    }
    if (spec.arch == "qwen3" || spec.arch == "qwen3moe" || gemma3 || (qwen35 && !recurrent)) {
      tensors.push_back({p + "attn_q_norm.weight", {layer_head_dim}});
      if (!shared_kv) tensors.push_back({p + "attn_k_norm.weight", {layer_head_dim}});
    }
    if (gemma4) tensors.push_back({p + "layer_output_scale.weight", {1}});
    if (gemma4 && per_layer > 0) {
      tensors.push_back({p + "inp_gate.weight", {d, spec.n_embd_per_layer}});
      tensors.push_back({p + "proj.weight", {spec.n_embd_per_layer, d}});
      tensors.push_back({p + "post_norm.weight", {d}});
    }
    if (gpt_oss) {
      tensors.push_back({p + "attn_output.bias", {d}});
      tensors.push_back({p + "attn_sinks.weight", {spec.n_head}});
    }
    // gpt-oss's and qwen35's FFN norm goes by the name of gemma3's post norm.
    if (gemma3 || gpt_oss || qwen35) tensors.push_back({p + "post_attention_norm.weight", {d}});
    if (!gpt_oss && !qwen35) tensors.push_back({p + "ffn_norm.weight", {d}});
    if (gemma3) tensors.push_back({p + "post_ffw_norm.weight", {d}});
    if (moe && (!deepseek || i >= spec.n_layer_dense_lead)) {
      const int64_t e = spec.n_expert, f = spec.n_ff_expert;
      const int64_t shared = qwen35moe ? spec.n_ff : f * spec.n_expert_shared;
      if (qwen35moe) tensors.push_back({p + "ffn_gate_inp_shexp.weight", {d}});
      if (gemma4) {
        tensors.push_back({p + "ffn_gate.weight", {d, ff_of(i)}});
        tensors.push_back({p + "ffn_up.weight", {d, ff_of(i)}});
        tensors.push_back({p + "ffn_down.weight", {ff_of(i), d}});
        tensors.push_back({p + "ffn_gate_inp.scale", {d}});
        tensors.push_back({p + "pre_ffw_norm_2.weight", {d}});
        tensors.push_back({p + "post_ffw_norm_1.weight", {d}});
        tensors.push_back({p + "post_ffw_norm_2.weight", {d}});
        tensors.push_back({p + "ffn_down_exps.scale", {e}});
      }
      tensors.push_back({p + "ffn_gate_inp.weight", {d, e}});
      if (deepseek4 && i < ds4.hash_layers) tensors.push_back({p + "ffn_gate_tid2eid.weight", {spec.n_expert_used, n_vocab}});
      if (spec.sigmoid_gating || (deepseek4 && i >= ds4.hash_layers)) tensors.push_back({p + "exp_probs_b.bias", {e}});
      if (gemma4 && spec.fused_gate_up_exps) {
        tensors.push_back({p + "ffn_gate_up_exps.weight", {d, 2 * f, e}});
      } else {
        tensors.push_back({p + "ffn_gate_exps.weight", {d, f, e}});
        tensors.push_back({p + "ffn_up_exps.weight", {d, f, e}});
      }
      tensors.push_back({p + "ffn_down_exps.weight", {f, d, e}});
      if (gpt_oss) {
        tensors.push_back({p + "ffn_gate_inp.bias", {e}});
        tensors.push_back({p + "ffn_gate_exps.bias", {f, e}});
        tensors.push_back({p + "ffn_up_exps.bias", {f, e}});
        tensors.push_back({p + "ffn_down_exps.bias", {d, e}});
      }
      if (shared > 0) {
        tensors.push_back({p + "ffn_gate_shexp.weight", {d, shared}});
        tensors.push_back({p + "ffn_up_shexp.weight", {d, shared}});
        tensors.push_back({p + "ffn_down_shexp.weight", {shared, d}});
      }
    } else {
      tensors.push_back({p + "ffn_gate.weight", {d, ff_of(i)}});
      tensors.push_back({p + "ffn_up.weight", {d, ff_of(i)}});
      tensors.push_back({p + "ffn_down.weight", {ff_of(i), d}});
    }
  }

  const TensorContext ctx{n_blocks, spec.n_expert, spec.tied_output, spec.n_head / std::max(1, spec.n_head_kv)};
  for (auto& [name, dims] : tensors) {
    TensorType type = name.ends_with("ffn_gate_tid2eid.weight") ? TensorType::I32
                                                                 : choose_tensor_type(spec.mix, name, dims, ctx);
    // gpt-oss's experts are MXFP4 in every published file, and llama.cpp's
    // quantizer leaves them so; a float mix keeps them float (a file whose
    // every product is exact, to check the model's arithmetic by).
    const bool float_mix = spec.mix == QuantMix::kF16 || spec.mix == QuantMix::kF32;
    if (gpt_oss && !float_mix && name.ends_with("_exps.weight")) type = TensorType::MXFP4;
    plan.tensors.push_back({std::move(name), std::move(dims), type});
  }
  return {};
}

int64_t element_count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// The block a tensor's name belongs to ("blk.N."), or -1.
int block_of(const std::string& name) {
  if (!name.starts_with("blk.")) return -1;
  return std::atoi(name.c_str() + 4);
}

}  // namespace

std::optional<SyntheticSpec> synthetic_preset(const std::string& name) {
  for (const Preset& p : presets())
    if (name == p.name) return p.spec;
  return std::nullopt;
}

SyntheticSpec with_layers(SyntheticSpec spec, int n_layer) {
  const int before = spec.n_layer;
  spec.n_layer = n_layer;
  if (spec.shared_kv_layers <= 0 || before <= 0 || n_layer <= 0) return spec;
  // The layers that make their own caches, in proportion, rounded up to
  // whole groups of local layers and their global one: the shared layers
  // must follow a local and a global layer.
  const int group = std::max(1, spec.sliding_pattern);
  const int own = std::max(1, ((before - spec.shared_kv_layers) * n_layer + before - 1) / before);
  const int own_groups = (own + group - 1) / group * group;
  spec.shared_kv_layers = std::max(0, n_layer - own_groups);
  return spec;
}

std::optional<std::string> synthetic_miniature(const std::string& arch) {
  if (arch == "gemma3") return "gemma3-small";
  if (arch == "gemma4") return "gemma4-small";
  if (arch == "qwen3moe") return "qwen3moe-tiny";
  if (arch == "deepseek2") return "deepseek2-tiny";
  if (arch == "deepseek4") return "deepseek-v4-tiny";
  if (arch == "gpt-oss") return "gpt-oss-tiny";
  if (arch == "qwen35") return "qwen35-tiny";
  if (arch == "qwen35moe") return "qwen35moe-tiny";
  if (arch == "qwen3next") return "qwen3next-tiny";
  return std::nullopt;  // llama, qwen2, qwen3: the defaults of SyntheticSpec are small already
}

std::vector<std::string> synthetic_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.push_back(p.name);
  return names;
}


Result<SyntheticSize> synthetic_model_size(const SyntheticSpec& spec) {
  SyntheticPlan plan;
  if (Status s = plan_synthetic_model(spec, plan); !s.ok()) return s;
  SyntheticSize size;
  const SyntheticSpec& sp = plan.spec;
  for (const PlannedTensor& t : plan.tensors) {
    const uint64_t bytes = row_bytes(t.type, element_count(t.dims));
    ++size.n_tensors;
    size.tensor_bytes += bytes;
    const bool no_product = t.dims.size() < 2 || t.name.ends_with("_ape.weight") || t.type == TensorType::I32;
    if (no_product || block_of(t.name) >= sp.n_layer) continue;
    if (t.name == "token_embd.weight" || t.name == "per_layer_token_embd.weight")
      size.bytes_per_token += bytes / static_cast<uint64_t>(t.dims[1]);
    else if (t.name.ends_with("_exps.weight"))
      size.bytes_per_token += bytes / static_cast<uint64_t>(sp.n_expert) * static_cast<uint64_t>(sp.n_expert_used);
    else
      size.bytes_per_token += bytes;
  }
  return size;
}

Status write_synthetic_model(const SyntheticSpec& given, const std::string& path, ThreadPool& pool,
                             const QuantizeProgress& progress) {
  SyntheticPlan plan;
  if (Status s = plan_synthetic_model(given, plan); !s.ok()) return s;
  const SyntheticSpec& spec = plan.spec;
  gguf::GgufWriter& out = plan.out;
  const bool gpt_oss = spec.arch == "gpt-oss";
  const bool qwen35 = spec.arch == "qwen35" || spec.arch == "qwen35moe" || spec.arch == "qwen3next";
  // Weights are generated while the file is written, one slice at a time.
  const size_t n_tensors = plan.tensors.size();
  for (size_t i = 0; i < n_tensors; ++i) {
    const auto& [name, dims, type] = plan.tensors[i];
    if (type == TensorType::I32) {
      // Hash routing: token t goes to experts t, t + 1, ... (mod n_expert).
      std::vector<int32_t> ids;
      for (int64_t t = 0; t < dims[1]; ++t)
        for (int64_t j = 0; j < dims[0]; ++j) ids.push_back(static_cast<int32_t>((t + j) % spec.n_expert));
      if (Status s = out.add_tensor(name, TensorType::I32, dims, ids.data(), ids.size() * sizeof(int32_t)); !s.ok())
        return s;
      continue;
    }
    const int64_t cols = dims[0];
    const int64_t rows = element_count(dims) / cols;
    const bool random_vector = (gpt_oss && (name.ends_with(".bias") || name.ends_with("attn_sinks.weight"))) ||
                               (qwen35 && (name.ends_with("ssm_dt.bias") || name.ends_with("ffn_gate_inp_shexp.weight")));
    RowSource source;
    if (name.ends_with("ssm_a")) {
      // qwen35's decay rates -e^(A_log), A_log random: below 0, so that the
      // state decays.
      const uint64_t seed = hash_name(name, spec.seed);
      source = [cols, seed](int64_t, int64_t, float* values) {
        fill_gaussian(values, cols, seed, 0.5f);
        for (int64_t i = 0; i < cols; ++i) values[i] = -std::exp(values[i]);
      };
    } else if (name == "rope_freqs.weight" || name.ends_with("layer_output_scale.weight")) {
      // gemma4: its global layers turn the first global_rope_share of
      // their pairs (the rest divided by a huge factor stand still), as its
      // converter writes them, and each layer's
      // output shrinks a little.
      const bool rope = name == "rope_freqs.weight";
      const auto turning = static_cast<int64_t>(static_cast<double>(cols) * spec.global_rope_share);
      source = [cols, rope, turning](int64_t, int64_t, float* values) {
        for (int64_t i = 0; i < cols; ++i) values[i] = !rope ? 0.75f : i < turning ? 1.0f : 1e30f;
      };
    } else if (name.ends_with("ffn_gate_inp.scale") || name.ends_with("ffn_down_exps.scale")) {
      // gemma4's expert output factors: around 1, each its own; its router
      // factors around sqrt(n_embd), undoing the router input's
      // 1/sqrt(n_embd), so that random router logits spread as a trained
      // router's do instead of all nearly tying.
      const uint64_t seed = hash_name(name, spec.seed);
      const float around = name.ends_with("ffn_gate_inp.scale") ? std::sqrt(static_cast<float>(cols)) : 1.0f;
      source = [cols, seed, around](int64_t, int64_t, float* values) {
        fill_gaussian(values, cols, seed, 0.25f);
        for (int64_t i = 0; i < cols; ++i) values[i] = (values[i] + 1.0f) * around;
      };
    } else if (dims.size() == 1 && !random_vector) {
      const float value = name.find(".bias") != std::string::npos ? 0.0f : 1.0f;
      source = [cols, value](int64_t begin, int64_t end, float* values) {
        std::fill(values, values + (end - begin) * cols, value);
      };
    } else {
      // Embeddings get a fixed scale; matrices 1/sqrt(fan-in) so activations
      // neither vanish nor explode through the layers.
      // gpt-oss's biases and sinks: small and random, so that each one counts.
      const float stddev = name == "token_embd.weight" ? 1.0f
                           : random_vector            ? 0.1f
                                                      : 1.0f / std::sqrt(static_cast<float>(cols));
      const uint64_t seed = hash_name(name, spec.seed);
      source = [cols, seed, stddev, &pool](int64_t first, int64_t last, float* values) {
        pool.parallel_for(last - first, [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r)
            fill_gaussian(&values[r * cols], cols, seed + (first + r) * 0x9E37ull, stddev);
        });
      };
    }
    // Random weights see no activations to weigh: the types that need an
    // importance matrix (IQ1, IQ2) get every channel counted the same.
    RowImportance importance;
    if (quantize_needs_importance(type))
      importance = [equal = std::make_shared<std::vector<float>>(cols, 1.0f)](int64_t) { return equal->data(); };
    auto produce = quantized_rows_producer(type, rows, cols, std::move(source), pool, std::move(importance));
    auto with_progress = [i, n_tensors, name = name, &progress, produce](const gguf::GgufWriter::Sink& sink) {
      if (progress) progress(i, n_tensors, name);
      return produce(sink);
    };
    if (Status s = out.add_tensor_producer(name, type, dims, row_bytes(type, rows * cols), with_progress); !s.ok())
      return s;
  }
  Status written = out.write(path);
  if (written.ok() && progress) progress(n_tensors, n_tensors, "");
  return written;
}

}  // namespace revis
