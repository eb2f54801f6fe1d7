#include "model/compressor_cache.h"

#include <algorithm>

namespace revis {

CompressorCache::Strided::Strided(size_t bytes, int every, int n_ctx)
    : row_bytes(bytes),
      bytes_per_position((bytes + every - 1) / every),
      stride(every),
      data(static_cast<size_t>(n_ctx) * bytes_per_position) {}

int CompressorCache::resume_interval_of(const ModelConfig& c) {
  int largest = 0;
  for (int layer = 0; layer < c.n_layer; ++layer) largest = std::max(largest, c.ds4.compress_ratios[layer]);
  return largest;
}

CompressorCache::Layout CompressorCache::layout(const ModelConfig& c, int n_ctx) {
  Layout out;
  out.interval = resume_interval_of(c);
  out.index.assign(static_cast<size_t>(c.n_layer) * 2, -1);
  for (int layer = 0; layer < c.n_layer; ++layer) {
    const int ratio = c.ds4.compress_ratios[layer];
    if (ratio == 0) continue;
    for (int which = kAttention; which <= kIndexer; ++which) {
      if (which == kIndexer && ratio != 4) continue;
      Unit u;
      u.ratio = ratio;
      u.overlap = ratio == 4;
      u.dim = which == kAttention ? c.head_dim_k : c.ds4.indexer_dim;
      u.width = u.overlap ? 2 * u.dim : u.dim;
      u.span = u.overlap ? 2 * ratio : ratio;
      u.ring_rows = u.span + kRewind;
      u.keys = Strided(static_cast<size_t>(u.dim) * sizeof(uint16_t), ratio, n_ctx);
      if (u.overlap) u.resume = Strided(2 * static_cast<size_t>(ratio) * u.dim * sizeof(float), out.interval, n_ctx);
      out.index[layer * 2 + which] = static_cast<int>(out.units.size());
      out.units.push_back(std::move(u));
    }
  }
  return out;
}

bool CompressorCache::needed(const ModelConfig& c) {
  if (!c.is_deepseek4()) return false;
  for (int layer = 0; layer < c.n_layer; ++layer)
    if (c.ds4.compress_ratios[layer] != 0) return true;
  return false;
}

CompressorCache::CompressorCache(const ModelConfig& config, int n_ctx) : n_ctx_(n_ctx) {
  Layout l = layout(config, n_ctx);
  units_ = std::move(l.units);
  index_ = std::move(l.index);
  interval_ = l.interval;
  for (Unit& u : units_) {
    u.parts.assign(static_cast<size_t>(u.ring_rows) * u.width, 0.0f);
    u.scores.assign(static_cast<size_t>(u.ring_rows) * u.width, 0.0f);
    tail_floats_ += 2 * static_cast<size_t>(u.span) * u.width;
  }
}

uint16_t* CompressorCache::key(int layer, Which which, int group) {
  return reinterpret_cast<uint16_t*>(unit(layer, which).keys.row(group));
}

void CompressorCache::wrote(int pos) {
  high_ = std::max(high_, pos + 1);
  floor_ = std::max(floor_, high_ - kRewind);
}

void CompressorCache::closed_group(int layer, Which which, int pos) {
  Unit& u = unit(layer, which);
  if (!u.overlap || (pos + 1) % interval_ != 0) return;
  // The next group reads the first half (dim floats) of this group's rows.
  float* copy = reinterpret_cast<float*>(u.resume.row((pos + 1) / interval_ - 1));
  for (int j = 0; j < u.ratio; ++j) {
    const int at = pos + 1 - u.ratio + j;
    std::copy_n(ring_row(u.parts, layer, which, at), u.dim, copy + static_cast<size_t>(j) * u.dim);
    std::copy_n(ring_row(u.scores, layer, which, at), u.dim, copy + static_cast<size_t>(u.ratio + j) * u.dim);
  }
}

void CompressorCache::restore_resume_point(int q) {
  for (size_t i = 0; i < index_.size(); ++i) {
    if (index_[i] < 0 || q == 0) continue;
    const int layer = static_cast<int>(i / 2);
    const Which which = static_cast<Which>(i % 2);
    Unit& u = units_[index_[i]];
    if (!u.overlap) continue;  // no group is open at a resume point
    const float* copy = reinterpret_cast<const float*>(u.resume.row(q / interval_ - 1));
    for (int j = 0; j < u.ratio; ++j) {
      const int at = q - u.ratio + j;
      std::copy_n(copy + static_cast<size_t>(j) * u.dim, u.dim, ring_row(u.parts, layer, which, at));
      std::copy_n(copy + static_cast<size_t>(u.ratio + j) * u.dim, u.dim, ring_row(u.scores, layer, which, at));
    }
  }
  floor_ = high_ = q;
}

void CompressorCache::save_tail(int n, std::span<float> out) const {
  float* to = out.data();
  for (const Unit& u : units_)
    for (const std::vector<float>* ring : {&u.parts, &u.scores})
      for (int at = n - u.span; at < n; ++at, to += u.width) {
        if (at < 0)
          std::fill_n(to, u.width, 0.0f);
        else
          std::copy_n(ring->data() + static_cast<size_t>(at % u.ring_rows) * u.width, u.width, to);
      }
}

void CompressorCache::restore_tail(int n, std::span<const float> in) {
  const float* from = in.data();
  for (Unit& u : units_)
    for (std::vector<float>* ring : {&u.parts, &u.scores})
      for (int at = n - u.span; at < n; ++at, from += u.width)
        if (at >= 0) std::copy_n(from, u.width, ring->data() + static_cast<size_t>(at % u.ring_rows) * u.width);
  floor_ = high_ = n;
}

void CompressorCache::append_runs(std::vector<KvRun>& runs) {
  const size_t n_ctx = static_cast<size_t>(n_ctx_);
  for (Unit& u : units_) {
    runs.push_back({u.keys.data.data(), u.keys.bytes_per_position, n_ctx, static_cast<size_t>(u.keys.stride)});
    if (u.overlap)
      runs.push_back({u.resume.data.data(), u.resume.bytes_per_position, n_ctx, static_cast<size_t>(u.resume.stride)});
  }
}

size_t CompressorCache::bytes() const {
  size_t total = 0;
  for (const Unit& u : units_)
    total += u.keys.data.size() + u.resume.data.size() + (u.parts.size() + u.scores.size()) * sizeof(float);
  return total;
}

size_t CompressorCache::bytes_per_position(const ModelConfig& config) {
  size_t total = 0;
  for (const Unit& u : layout(config, 1).units) total += u.keys.bytes_per_position + u.resume.bytes_per_position;
  return total;
}

size_t CompressorCache::tail_bytes(const ModelConfig& config) {
  size_t floats = 0;
  for (const Unit& u : layout(config, 1).units) floats += 2 * static_cast<size_t>(u.span) * u.width;
  return floats * sizeof(float);
}

size_t CompressorCache::ring_bytes(const ModelConfig& config) {
  size_t floats = 0;
  for (const Unit& u : layout(config, 1).units) floats += 2 * static_cast<size_t>(u.ring_rows) * u.width;
  return floats * sizeof(float);
}

}  // namespace revis
