// ModelWeights: views of a model's tensors inside the mapped GGUF file, with
// every shape checked at load against the ModelConfig. Matrices are used in
// place (never copied); 1-D tensors (norms, biases, RoPE factors) are small
// and are converted to float32 vectors once.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/gguf.h"
#include "model/config.h"
#include "quant/types.h"
#include "revis/status.h"

namespace revis {

// A row-major matrix of `rows` rows, each `cols` values of `type`; for expert
// tensors a stack of `n_mats` such matrices.
struct Matrix {
  TensorType type = TensorType::F32;
  int64_t cols = 0;
  int64_t rows = 0;
  int64_t n_mats = 1;
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;

  bool empty() const { return data == nullptr; }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  Matrix slice(int64_t mat) const;  // one matrix of a stack
};

struct LayerWeights {
  std::vector<float> attn_norm;
  Matrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;          // qwen2 only
  std::vector<float> q_norm, k_norm;      // qwen3 only, one head's width
  std::vector<float> ffn_norm;
  Matrix w_gate, w_up, w_down;            // dense FFN
  Matrix router;                          // qwen3moe: [n_embd] -> n_expert logits
  Matrix gate_exps, up_exps, down_exps;   // qwen3moe: stacks of n_expert matrices
};

struct ModelWeights {
  Matrix token_embd;
  std::vector<float> output_norm;
  Matrix output;                          // token_embd when the output is tied
  std::vector<float> rope_freq_factors;   // Llama 3.1-style; empty when absent
  std::vector<LayerWeights> layers;
};

// Binds the tensors of `file` to `config` (filling config.n_vocab). Errors
// name the tensor and the expected shape or type.
Result<ModelWeights> load_model_weights(const gguf::GgufFile& file, ModelConfig& config);

}  // namespace revis
