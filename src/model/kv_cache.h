// KvCache: the keys and values of every layer for positions [0, n_ctx),
// stored as float16 (half the memory of float32, and what llama.cpp keeps by
// default). Keys are stored after RoPE. Owned by one session.
//
// Layout: [layer][kv head][position][head dim], so the history of one head
// is one contiguous run that attention converts and scans in a single pass.
// A token takes n_head_kv * (head_dim_k + head_dim_v) halves per layer.
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
  KvCache(const ModelConfig& config, int n_ctx);
  ~KvCache();

  int n_ctx() const { return n_ctx_; }
  size_t bytes() const {
    return (keys_.size() + values_.size()) * sizeof(uint16_t) + recurrent_.size() * sizeof(float) +
           (compressor_ ? compressor_->bytes() : 0);
  }

  uint16_t* key(int layer, int head, int pos) { return keys_.data() + offset(layer, head, pos) * head_dim_k_; }
  uint16_t* value(int layer, int head, int pos) {
    return values_in_keys_ ? key(layer, head, pos) : values_.data() + offset(layer, head, pos) * head_dim_v_;
  }
  // Halves from one position's value to the next's.
  int value_stride() const { return values_in_keys_ ? head_dim_k_ : head_dim_v_; }

  // deepseek4's compressing layers (above); null for other models.
  CompressorCache* compressor() { return compressor_.get(); }
  const CompressorCache* compressor() const { return compressor_.get(); }

  // The rows of the layers that run on a GPU also live in its memory
  // (model/device_layers.h); null until such a layer first runs here.
  std::unique_ptr<DeviceKv> device_kv;
  // The host rows [0, n) were written from outside (a checkpoint read into
  // them): the GPU copies them up before it next uses them.
  void forget_device_rows(int n);

  // qwen35's state of recurrent layer r (r counts the recurrent layers):
  // conv_state_floats() and delta_state_floats() values (config.h).
  float* conv_state(int r) { return &recurrent_[r * recurrent_stride_]; }
  float* delta_state(int r) { return &recurrent_[r * recurrent_stride_ + conv_floats_]; }
  // Every recurrent layer's state, layer after layer (a checkpoint's copy).
  std::span<float> recurrent_state() { return recurrent_; }
  std::span<const float> recurrent_state() const { return recurrent_; }
  int recurrent_pos() const { return recurrent_pos_; }
  void set_recurrent_pos(int pos) { recurrent_pos_ = pos; }
  // Zeroes every recurrent state, at position 0.
  void reset_recurrent();

 private:
  size_t offset(int layer, int head, int pos) const {
    return (static_cast<size_t>(layer) * n_head_kv_ + head) * n_ctx_ + pos;
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
  int n_head_kv_, head_dim_k_, head_dim_v_;
  bool values_in_keys_;
  Buffer keys_, values_;
  std::unique_ptr<CompressorCache> compressor_;
  size_t conv_floats_ = 0, recurrent_stride_ = 0;
  std::vector<float> recurrent_;  // per recurrent layer: convolution state, then delta-net state
  int recurrent_pos_ = 0;
};

}  // namespace revis
