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
      planes_(deepseek4_planes(config, n_ctx, plane_first_)),
      plane_data_(planes_.empty() ? 0 : 2 * (planes_.back().offset + static_cast<size_t>(planes_.back().width) * n_ctx)) {
  if (!config.is_hybrid()) return;
  conv_floats_ = config.delta_net.conv_state_floats();
  recurrent_stride_ = conv_floats_ + config.delta_net.delta_state_floats();
  recurrent_.assign(recurrent_stride_ * config.n_recurrent_layer(), 0.0f);
}

void KvCache::reset_recurrent() {
  std::fill(recurrent_.begin(), recurrent_.end(), 0.0f);
  recurrent_pos_ = 0;
}

std::vector<KvCache::Plane> KvCache::deepseek4_planes(const ModelConfig& c, int n_ctx, std::vector<int>& first) {
  std::vector<Plane> planes;
  if (!c.is_deepseek4()) return planes;
  size_t offset = 0;
  auto add = [&](int width) {
    planes.push_back({offset, width});
    offset += static_cast<size_t>(width) * n_ctx;
  };
  for (int layer = 0; layer < c.n_layer; ++layer) {
    first.push_back(static_cast<int>(planes.size()));
    const int ratio = c.ds4.compress_ratios[layer];
    if (ratio == 0) continue;
    const int overlap = ratio == 4 ? 2 : 1;  // ratio 4's state rows serve two groups
    add(overlap * c.head_dim_k);
    add(overlap * c.head_dim_k);
    add(c.head_dim_k);
    if (ratio != 4) continue;
    add(2 * c.ds4.indexer_dim);
    add(2 * c.ds4.indexer_dim);
    add(c.ds4.indexer_dim);
  }
  first.push_back(static_cast<int>(planes.size()));
  return planes;
}

size_t KvCache::plane_bytes_per_position(const ModelConfig& config) {
  std::vector<int> first;
  size_t floats = 0;
  for (const Plane& p : deepseek4_planes(config, 1, first)) floats += p.width;
  return floats * sizeof(float);
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
