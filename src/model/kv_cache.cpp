#include "model/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>

#include "model/cache_walk.h"
#include "model/device_layers.h"

namespace revis {

KvCache::~KvCache() = default;

void KvCache::forget_device_rows(int n) {
  if (!device_kv) return;
  device_kv->device_rows = 0;
  device_kv->host_rows = n;
}

namespace {

// Halves of every layer's keys and values, of the ring layers or the others.
size_t halves(const std::vector<KvCache::LayerShape>& layers, bool ring) {
  size_t n = 0;
  for (const KvCache::LayerShape& l : layers)
    if (l.ring == ring) n += static_cast<size_t>(l.n_head_kv) * l.rows * (l.dim_k + l.dim_v);
  return n;
}

}  // namespace

std::vector<KvCache::LayerShape> KvCache::layer_shapes(const ModelConfig& c, int n_ctx, int min_ring_rows) {
  std::vector<LayerShape> layers;
  for (int i = 0; i < c.n_kv_layer(); ++i) {
    // A hybrid's cache layers are its attention layers, all alike; the
    // others' are the model's layers of the same index.
    const int layer = c.is_hybrid() ? 0 : i;
    LayerShape s{.n_head_kv = c.kv_heads(layer), .dim_k = c.key_width(layer), .dim_v = c.value_width(layer),
                 .rows = n_ctx};
    if (c.values_in_keys()) s.dim_v = 0;
    if (!c.is_hybrid() && c.sliding.is_local(layer)) {
      const int tile = attention_tile(std::max(s.dim_k, s.dim_v));
      s.ring = true;
      s.rows = (std::max(c.sliding.window + kChunkTokens, min_ring_rows) + tile - 1) / tile * tile;
    }
    layers.push_back(s);
  }
  return layers;
}

size_t KvCache::bytes_per_position(const ModelConfig& config) {
  std::vector<LayerShape> layers = layer_shapes(config, 1);
  return halves(layers, false) * sizeof(uint16_t) +
         (CompressorCache::needed(config) ? CompressorCache::bytes_per_position(config) : 0);
}

size_t KvCache::state_bytes(const ModelConfig& config) {
  if (config.is_hybrid())
    return static_cast<size_t>(config.n_recurrent_layer()) *
           (config.delta_net.conv_state_floats() + config.delta_net.delta_state_floats()) * sizeof(float);
  return halves(layer_shapes(config, 1), true) * sizeof(uint16_t);
}

KvCache::KvCache(const ModelConfig& config, int n_ctx, int min_ring_rows)
    : n_ctx_(n_ctx),
      keys_(halves(layer_shapes(config, n_ctx, min_ring_rows), false)),
      rings_(halves(layer_shapes(config, n_ctx, min_ring_rows), true)),
      compressor_(CompressorCache::needed(config) ? std::make_unique<CompressorCache>(config, n_ctx) : nullptr) {
  // Each layer's keys, then its values, in the buffer of its kind.
  uint16_t* next[2] = {keys_.data(), rings_.data()};
  for (const LayerShape& s : layer_shapes(config, n_ctx, min_ring_rows)) {
    uint16_t*& at = next[s.ring ? 1 : 0];
    Layer l{s, at, nullptr};
    at += static_cast<size_t>(s.n_head_kv) * s.rows * s.dim_k;
    l.values = at;
    at += static_cast<size_t>(s.n_head_kv) * s.rows * s.dim_v;
    layers_.push_back(l);
    if (s.ring) window_ = config.sliding.window;
  }
  if (!config.is_hybrid()) return;
  conv_floats_ = config.delta_net.conv_state_floats();
  recurrent_stride_ = conv_floats_ + config.delta_net.delta_state_floats();
  recurrent_.assign(recurrent_stride_ * config.n_recurrent_layer(), 0.0f);
}

std::span<float> KvCache::recurrent_state() {
  if (!recurrent_.empty()) return recurrent_;
  // A ring's rows are a multiple of a tile (8 positions): whole floats.
  return {reinterpret_cast<float*>(rings_.data()), rings_.size() / 2};
}

bool KvCache::can_continue_at(int p) const {
  if (p == 0) return true;
  if (!recurrent_.empty()) return p == recurrent_pos_;
  if (rings_.size() == 0) return true;
  return p <= recurrent_pos_ && std::max(0, p - (window_ - 1)) >= ring_first_;
}

int KvCache::rewind_reach() const {
  if (!recurrent_.empty()) return 0;
  if (compressor_) return CompressorCache::kRewind;
  if (rings_.size() == 0) return n_ctx_;
  int rows = n_ctx_;
  for (const Layer& l : layers_)
    if (l.shape.ring) rows = std::min(rows, l.shape.rows);
  return rows == n_ctx_ ? n_ctx_ : rows - (window_ - 1);
}

void KvCache::wrote(int n_past, int n) {
  int rows = 0;
  for (const Layer& l : layers_)
    if (l.shape.ring) rows = rows == 0 ? l.shape.rows : std::min(rows, l.shape.rows);
  ring_first_ = std::max(n_past == 0 ? 0 : ring_first_, n_past + n - rows);
  if (rows == 0) ring_first_ = 0;
  recurrent_pos_ = n_past + n;
}

void KvCache::set_recurrent_pos(int pos) {
  recurrent_pos_ = pos;
  ring_first_ = rings_.size() == 0 ? 0 : std::max(0, pos - (window_ - 1));
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
