// ModelConfig: the hyperparameters of a transformer, read from GGUF metadata
// alone (`<arch>.embedding_length`, `<arch>.attention.head_count`, ...).
// One struct describes every supported family; the family only switches a
// few flags (RoPE layout, QKV bias, QK-norm, routed experts).
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf.h"
#include "revis/status.h"

namespace revis {

enum class Architecture { kLlama, kQwen2, kQwen3, kQwen3Moe };
const char* architecture_name(Architecture arch);

// How RoPE pairs up the dimensions of a head: adjacent (x[2i], x[2i+1]) as in
// the original Llama, or the two halves (x[i], x[i + d/2]) as in GPT-NeoX/Qwen.
enum class RopeLayout { kAdjacent, kNeox };

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string name;
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim_k = 0;   // may differ from n_embd / n_head (Qwen3)
  int head_dim_v = 0;
  int n_ff = 0;
  float rms_eps = 1e-5f;

  RopeLayout rope_layout = RopeLayout::kAdjacent;
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear scaling: positions are multiplied by this
  int rope_dims = 0;             // leading dimensions of each head that rotate

  // Mixture of experts (qwen3moe); zero for dense models.
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_expert = 0;

  bool has_qkv_bias = false;
  bool has_qk_norm = false;

  int q_dim() const { return n_head * head_dim_k; }
  int kv_dim_k() const { return n_head_kv * head_dim_k; }
  int kv_dim_v() const { return n_head_kv * head_dim_v; }
};

// Reads and validates the hyperparameters. Errors name the key and the value
// that was expected ("qwen3.attention.head_count_kv: 3 does not divide 8").
Result<ModelConfig> read_model_config(const gguf::GgufFile& file);

}  // namespace revis
