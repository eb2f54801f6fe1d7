#include "model/config.h"

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
};

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

}  // namespace

const char* architecture_name(Architecture arch) {
  for (const ArchEntry& e : kArchitectures)
    if (e.arch == arch) return e.gguf_name;
  return "?";
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
                         "' is not supported (expected llama, qwen2, qwen3 or qwen3moe)");
  c.name = f.get_string("general.name", *arch_name).value();
  const std::string p = *arch_name + ".";
  constexpr int64_t kMaxDim = 1 << 20;

  Status s;
  if (!(s = read_dim(f, p + "embedding_length", 0, 1, kMaxDim, c.n_embd)).ok()) return s;
  if (!(s = read_dim(f, p + "block_count", 0, 1, 4096, c.n_layer)).ok()) return s;
  if (!(s = read_dim(f, p + "attention.head_count", 0, 1, 4096, c.n_head)).ok()) return s;
  if (!(s = read_dim(f, p + "attention.head_count_kv", c.n_head, 1, c.n_head, c.n_head_kv)).ok()) return s;
  if (c.n_head % c.n_head_kv != 0)
    return Status::error(p + "attention.head_count_kv: " + std::to_string(c.n_head_kv) + " does not divide head_count " +
                         std::to_string(c.n_head));
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

  auto scaling = f.get_string(p + "rope.scaling.type", "none");
  if (!scaling.ok()) return scaling.status();
  if (*scaling == "linear") {
    auto factor = f.get_float(p + "rope.scaling.factor", 1.0);
    if (!factor.ok()) return factor.status();
    if (!(*factor >= 1)) return Status::error(p + "rope.scaling.factor: expected a value >= 1");
    c.rope_freq_scale = static_cast<float>(1.0 / *factor);
  } else if (*scaling != "none") {
    // Llama 3 scaling needs no metadata: it arrives as the rope_freqs tensor.
    return Status::error(p + "rope.scaling.type: '" + *scaling + "' is not supported (expected none or linear)");
  }

  c.rope_layout = c.arch == Architecture::kLlama ? RopeLayout::kAdjacent : RopeLayout::kNeox;
  c.has_qkv_bias = c.arch == Architecture::kQwen2;
  c.has_qk_norm = c.arch == Architecture::kQwen3 || c.arch == Architecture::kQwen3Moe;

  if (c.arch == Architecture::kQwen3Moe) {
    if (!(s = read_dim(f, p + "expert_count", 0, 1, 4096, c.n_expert)).ok()) return s;
    if (!(s = read_dim(f, p + "expert_used_count", 0, 1, c.n_expert, c.n_expert_used)).ok()) return s;
    if (!(s = read_dim(f, p + "expert_feed_forward_length", 0, 1, kMaxDim, c.n_ff_expert)).ok()) return s;
  } else {
    if (!(s = read_dim(f, p + "feed_forward_length", 0, 1, kMaxDim, c.n_ff)).ok()) return s;
  }
  return c;
}

}  // namespace revis
