#include "model/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>

#include "model/device_layers.h"

namespace revis {

KvCache::~KvCache() = default;

void KvCache::forget_device_rows(int n) {
  if (!device_kv) return;
  device_kv->device_rows = 0;
  device_kv->host_rows = n;
}

KvCache::KvCache(const ModelConfig& config, int n_ctx)
    : n_ctx_(n_ctx),
      n_head_kv_(config.n_head_kv),
      head_dim_k_(config.head_dim_k),
      head_dim_v_(config.head_dim_v),
      values_in_keys_(config.values_in_keys()),
      keys_(static_cast<size_t>(config.n_kv_layer()) * n_ctx * config.kv_dim_k()),
      values_(config.values_in_keys() ? 0 : static_cast<size_t>(config.n_kv_layer()) * n_ctx * config.kv_dim_v()),
      compressor_(CompressorCache::needed(config) ? std::make_unique<CompressorCache>(config, n_ctx) : nullptr) {
  if (!config.is_hybrid()) return;
  conv_floats_ = config.delta_net.conv_state_floats();
  recurrent_stride_ = conv_floats_ + config.delta_net.delta_state_floats();
  recurrent_.assign(recurrent_stride_ * config.n_recurrent_layer(), 0.0f);
}

void KvCache::reset_recurrent() {
  std::fill(recurrent_.begin(), recurrent_.end(), 0.0f);
  recurrent_pos_ = 0;
}

KvCache::Buffer::Buffer(size_t n) : size_(n) {
  if (n == 0) return;
  void* p = ::mmap(nullptr, n * sizeof(uint16_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();  // as the std::vector it replaces would
  // A hint only (see the header): nothing changes where huge pages are off.
  ::madvise(p, n * sizeof(uint16_t), MADV_HUGEPAGE);
  data_ = static_cast<uint16_t*>(p);
}

KvCache::Buffer::~Buffer() {
  if (data_) ::munmap(data_, size_ * sizeof(uint16_t));
}

}  // namespace revis
