// KvCache: the keys and values of every cache layer, stored as float16
// (half the memory of float32, and what llama.cpp keeps by default). Keys
// are stored after RoPE. Owned by one session.
//
// Geometry is per layer (layer_shapes): each has its own KV head count and
// key and value widths, and its rows. A global layer keeps one row per
// position, [0, n_ctx). A sliding-window layer (config.h's SlidingWindow)
// keeps a ring: position p lives in row p % ring_rows, where ring_rows is
// the window plus the most positions one forward pass writes before it
// reads (cache_walk.h's chunk), rounded up to whole attention tiles, so
// that a pass never overwrites a row a query of it still needs and no tile
// wraps. A ring is state, not rows by position: it holds the positions
// [ring_first(), recurrent_pos()), and a pass may continue at p only while
// the window before p is among them (can_continue_at).
//
// Layout: per layer [kv head][row][head dim], so the history of one head
// is one contiguous run that attention converts and scans in a single pass.
//
// Multi-head latent attention (deepseek2) caches one row per token and
// layer, [latent | RoPE key] (config.h: one KV head, head_dim_v = 0): its
// values are the latent, the first kv_lora_rank halves of that row, so
// value() points into the key row and value_stride() is the key row's width.
//
// deepseek4 (config.h's Deepseek4) caches its one key-value head per token
// as MLA does its row; its compressing layers keep the rest in a
// CompressorCache (model/compressor_cache.h): compressed keys per group,
// the state of the groups still open, and copies of it at resume points.
//
// qwen35 (config.h's GatedDeltaNet) keeps keys and values for its
// full-attention layers only (their place among them: config.kv_layer),
// and for each recurrent layer a float32 state that is not indexed by
// position: the convolution's last inputs and the delta-net's matrices,
// as they stand after the first recurrent_pos() tokens. That state cannot
// go back to an earlier position: a forward pass must continue from
// recurrent_pos() or start again at 0 (model.h).
//
// recurrent_state() is a cache's state not indexed by position, what a
// checkpoint stores whole: the recurrent layers' floats, or every ring,
// layer after layer (their float16 rows, in pairs, as floats).
//
// Memory: zeroed pages mapped from the kernel, not written at construction,
// so a new session costs nothing until its rows are used (a checkpoint read
// straight into the cache faults its pages in as it lands, instead of after
// a pass that zero-fills them). The pages are asked to be transparent huge
// pages (MADV_HUGEPAGE): faulted 2 MiB at a time, a resume's first touch of
// hundreds of MiB costs a fraction of the 4 KiB faults (docs/kvstore.md has
// the figures, and the cost in memory and on fragmented machines).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/compressor_cache.h"
#include "model/config.h"

namespace revis {

struct DeviceKv;

class KvCache {
 public:
  // min_ring_rows: rings of at least that many rows (a longer rewind
  // reach; with n_ctx, a ring that never wraps).
  KvCache(const ModelConfig& config, int n_ctx, int min_ring_rows = 0);
  ~KvCache();

  // One cache layer's geometry: rows is n_ctx, or a ring's rows.
  struct LayerShape {
    int n_head_kv = 0, dim_k = 0, dim_v = 0;  // dim_v 0: the values are in the key rows
    int rows = 0;
    bool ring = false;
  };
  static std::vector<LayerShape> layer_shapes(const ModelConfig& config, int n_ctx, int min_ring_rows = 0);
  // Bytes that one position takes in the layers kept by position (their
  // keys and values, and deepseek4's compressed keys and resume copies);
  // the rings are not among them.
  static size_t bytes_per_position(const ModelConfig& config);
  // Bytes of recurrent_state() for `config`, whatever the context.
  static size_t state_bytes(const ModelConfig& config);

  int n_ctx() const { return n_ctx_; }
  size_t bytes() const {
    return (keys_.size() + rings_.size()) * sizeof(uint16_t) + recurrent_.size() * sizeof(float) +
           (compressor_ ? compressor_->bytes() : 0);
  }
  const LayerShape& shape(int layer) const { return layers_[layer].shape; }

  uint16_t* key(int layer, int head, int pos) {
    const Layer& l = layers_[layer];
    return l.keys + (static_cast<size_t>(head) * l.shape.rows + row(l, pos)) * l.shape.dim_k;
  }
  uint16_t* value(int layer, int head, int pos) {
    const Layer& l = layers_[layer];
    if (l.shape.dim_v == 0) return key(layer, head, pos);
    return l.values + (static_cast<size_t>(head) * l.shape.rows + row(l, pos)) * l.shape.dim_v;
  }
  // Halves from one position's value to the next's.
  int value_stride(int layer) const {
    const LayerShape& s = layers_[layer].shape;
    return s.dim_v == 0 ? s.dim_k : s.dim_v;
  }

  // deepseek4's compressing layers (above); null for other models.
  CompressorCache* compressor() { return compressor_.get(); }
  const CompressorCache* compressor() const { return compressor_.get(); }

  // The rows of the layers that run on a GPU also live in its memory
  // (model/device_layers.h); null until such a layer first runs here.
  std::unique_ptr<DeviceKv> device_kv;
  // The host rows [0, n) were written from outside (a checkpoint read into
  // them): the GPU copies them up before it next uses them.
  void forget_device_rows(int n);

  // Whether a forward pass may start at position p: always for a cache
  // kept by position; for a hybrid at 0 or recurrent_pos(); with rings at
  // 0 or where every ring holds the window before p.
  bool can_continue_at(int p) const;
  // How many of the positions last written can always be taken back
  // (truncate, then continue) with nothing evaluated again: any without
  // state, none for a hybrid, for rings what a ring holds beyond its
  // window, for deepseek4 its compressors' CompressorCache::kRewind.
  int rewind_reach() const;
  // A forward pass wrote positions [n_past, n_past + n).
  void wrote(int n_past, int n);
  // The first position every ring holds (0 without rings).
  int ring_first() const { return ring_first_; }

  // qwen35's state of recurrent layer r (r counts the recurrent layers):
  // conv_state_floats() and delta_state_floats() values (config.h).
  float* conv_state(int r) { return &recurrent_[r * recurrent_stride_]; }
  float* delta_state(int r) { return &recurrent_[r * recurrent_stride_ + conv_floats_]; }
  // The state not indexed by position (above); empty without.
  std::span<float> recurrent_state();
  std::span<const float> recurrent_state() const { return const_cast<KvCache*>(this)->recurrent_state(); }
  // The position the state stands at. set_recurrent_pos: a state was
  // written from outside (a checkpoint, a kept copy) as it stood after pos
  // tokens; of a ring, only the window before pos is trusted.
  int recurrent_pos() const { return recurrent_pos_; }
  void set_recurrent_pos(int pos);
  // Zeroes every recurrent state, at position 0.
  void reset_recurrent();

 private:
  struct Layer {
    LayerShape shape;
    uint16_t* keys = nullptr;
    uint16_t* values = nullptr;
  };
  static size_t row(const Layer& l, int pos) {
    return l.shape.ring ? static_cast<size_t>(pos) % l.shape.rows : static_cast<size_t>(pos);
  }
  // n float16 values of zeroed anonymous memory, unmapped on destruction.
  class Buffer {
   public:
    explicit Buffer(size_t n);
    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    uint16_t* data() { return data_; }
    size_t size() const { return size_; }

   private:
    uint16_t* data_ = nullptr;
    size_t size_ = 0;
  };

  int n_ctx_;
  int window_ = 0;                // of the ring layers; 0 without
  std::vector<Layer> layers_;
  Buffer keys_;                   // the layers kept by position: keys, then values, layer after layer
  Buffer rings_;                  // the ring layers', likewise: recurrent_state()
  int ring_first_ = 0;
  std::unique_ptr<CompressorCache> compressor_;
  size_t conv_floats_ = 0, recurrent_stride_ = 0;
  std::vector<float> recurrent_;  // per recurrent layer: convolution state, then delta-net state
  int recurrent_pos_ = 0;
};

}  // namespace revis
