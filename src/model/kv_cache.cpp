#include "model/kv_cache.h"

#include <sys/mman.h>

#include <new>

namespace revis {

KvCache::KvCache(const ModelConfig& config, int n_ctx)
    : n_ctx_(n_ctx),
      n_head_kv_(config.n_head_kv),
      head_dim_k_(config.head_dim_k),
      head_dim_v_(config.head_dim_v),
      values_in_keys_(config.is_mla()),
      keys_(static_cast<size_t>(config.n_layer) * n_ctx * config.kv_dim_k()),
      values_(static_cast<size_t>(config.n_layer) * n_ctx * config.kv_dim_v()) {}

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
