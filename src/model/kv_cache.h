// KvCache: the keys and values of every layer for positions [0, n_ctx),
// stored as float16 (half the memory of float32, and what llama.cpp keeps by
// default). Keys are stored after RoPE. Owned by one session.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace revis {

class KvCache {
 public:
  KvCache(const ModelConfig& config, int n_ctx);

  int n_ctx() const { return n_ctx_; }
  size_t bytes() const { return (keys_.size() + values_.size()) * sizeof(uint16_t); }

  uint16_t* key(int layer, int pos) { return keys_.data() + (static_cast<size_t>(layer) * n_ctx_ + pos) * k_dim_; }
  uint16_t* value(int layer, int pos) { return values_.data() + (static_cast<size_t>(layer) * n_ctx_ + pos) * v_dim_; }

 private:
  int n_ctx_;
  int k_dim_, v_dim_;
  std::vector<uint16_t> keys_, values_;
};

}  // namespace revis
