// A direct computation of one imatrix entry, for the tests of the collector
// and of `revis imatrix`: layer 0's attn_q (and attn_k, attn_v) sees
// rms_norm(token embedding) * attn_norm of every token.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/gguf.h"
#include "model/ops.h"
#include "quant/quant.h"

namespace revis::testing {

// Per channel, the sum over `tokens` of layer 0's attn_q input squared.
inline std::vector<double> attn_q_input_squares(const gguf::GgufFile& file, const std::vector<int32_t>& tokens,
                                                float rms_eps) {
  const gguf::TensorInfo& embd = *file.tensor("token_embd.weight");
  const gguf::TensorInfo& norm = *file.tensor("blk.0.attn_norm.weight");
  const int64_t d = embd.dims[0];
  std::vector<double> squares(static_cast<size_t>(d), 0.0);
  std::vector<float> row(static_cast<size_t>(d)), normed(static_cast<size_t>(d));
  for (int32_t t : tokens) {
    dequantize_row(embd.type, embd.data + row_bytes(embd.type, d) * t, row.data(), d);
    rms_norm(normed.data(), row.data(), reinterpret_cast<const float*>(norm.data), static_cast<int>(d), rms_eps);
    for (int64_t j = 0; j < d; ++j) squares[static_cast<size_t>(j)] += static_cast<double>(normed[j]) * normed[j];
  }
  return squares;
}

}  // namespace revis::testing
