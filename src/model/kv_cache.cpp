#include "model/kv_cache.h"

namespace revis {

KvCache::KvCache(const ModelConfig& config, int n_ctx)
    : n_ctx_(n_ctx),
      n_head_kv_(config.n_head_kv),
      head_dim_k_(config.head_dim_k),
      head_dim_v_(config.head_dim_v),
      values_in_keys_(config.is_mla()),
      keys_(static_cast<size_t>(config.n_layer) * n_ctx * config.kv_dim_k()),
      values_(static_cast<size_t>(config.n_layer) * n_ctx * config.kv_dim_v()) {}

}  // namespace revis
