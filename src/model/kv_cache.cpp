#include "model/kv_cache.h"

namespace revis {

KvCache::KvCache(const ModelConfig& config, int n_ctx)
    : n_ctx_(n_ctx),
      k_dim_(config.kv_dim_k()),
      v_dim_(config.kv_dim_v()),
      keys_(static_cast<size_t>(config.n_layer) * n_ctx * k_dim_),
      values_(static_cast<size_t>(config.n_layer) * n_ctx * v_dim_) {}

}  // namespace revis
