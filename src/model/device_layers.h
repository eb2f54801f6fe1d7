// DeviceLayers: transformer layers of a Model run on a GPU (gpu::Device)
// while the rest run on the CPU, llama.cpp's -ngl. The unit of work is the
// forward pass's chunk, a batch: the rows of every sequence in it go
// through each matrix together, and each sequence meets its own cache.
//
// At load, each layer the device can run (unsupported(): the
// llama/qwen2/qwen3 block with a dense or qwen3moe FFN, and deepseek2's
// block of latent attention with a dense FFN or routed and shared experts;
// weights of the types the shaders read) has its weights uploaded once. A layer it cannot run stays on the CPU, and the
// model says which and why. The keys and values of the device's layers
// live in device memory (DeviceKv, one per KvCache); the host cache keeps
// their rows too, copied back only when someone reads it (sync_to_host:
// checkpoints), and copied up when the host rows were written from
// outside (a checkpoint restored: forget_device_rows).
//
// The device's float steps differ from the CPU kernels' (results agree
// within the golden tolerances, not to the bit), but are batch-invariant
// in the same way: a row's results do not depend on the other rows of its
// chunk, so a session resumed from a checkpoint continues with the bits of
// a cold prefill on the same device.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/routing.h"
#include "model/weights.h"
#include "revis/status.h"

namespace revis {

struct DeviceMatrix;

// The device's copy of one KvCache's rows for the device layers, and how
// far it and the host's copy are valid.
struct DeviceKv {
  // Per device layer: [kv head][position][head dim] float16, the host's
  // layout; no values where they are part of the key rows (latent
  // attention: config.h's values_in_keys).
  std::vector<gpu::Buffer> keys, values;
  int device_rows = 0;                    // positions [0, device_rows) are valid on the device
  int host_rows = 0;                      // positions [0, host_rows) of the host cache hold them
};

class DeviceLayers {
 public:
  // One sequence's rows [row, row + n) of a chunk, at positions n_past..
  struct Segment {
    KvCache* kv;
    int n_past, row, n;
  };

  // Why the device cannot run `layer` of this model ("" when it can).
  static std::string unsupported(const ModelConfig& c, const LayerWeights& l, int layer,
                                 const gpu::DeviceInfo& device);
  // Why the device cannot multiply by matrix m ("" when it can).
  static std::string unreadable(const Matrix& m, const gpu::DeviceInfo& device);
  // Uploads the layers marked in `on_device` (n_layer flags), and the
  // output matrix where one is given. Fails, naming the layer and the
  // bytes, when the device has no room.
  static Result<std::unique_ptr<DeviceLayers>> create(std::unique_ptr<gpu::Device> device, const ModelConfig& c,
                                                      const std::vector<LayerWeights>& layers,
                                                      std::vector<bool> on_device, const Rope& rope, float attn_scale,
                                                      const Matrix* output);
  ~DeviceLayers();

  bool runs(int layer) const { return on_device_[layer]; }
  int layer_count() const;
  const gpu::Device& device() const { return *device_; }

  // Runs the chunk's n rows of x (n_embd floats each) through layers
  // [first, last), all on the device, writing the result back to x.
  Status run(float* x, int n, std::span<const Segment> segments, int first, int last);
  // Copies the device's rows of `kv` that the host lacks into it.
  Status sync_to_host(KvCache& kv);

  // Whether the output matrix is on the device, and logits = W_out rows
  // for m rows of n_embd floats into m rows of n_vocab.
  bool has_output() const { return output_ != nullptr; }
  Status output(const float* rows, int m, float* logits);

 private:
  struct Layer;
  DeviceLayers() = default;
  Status prepare_cache(KvCache& kv, int n_past);
  Status copy_rows(KvCache& kv, int from, int count, bool to_device);
  // Where a matmul's rows lie in its buffer: floats before the first, and
  // from one to the next (0: packed, the matrix's width).
  struct Rows {
    uint32_t offset, stride;
  };
  // Recording the steps of a layer (device_layers.cpp).
  void matmul(const DeviceMatrix& m, const gpu::Buffer& in, gpu::Buffer& out, int tokens, int mat = 0,
              Rows in_rows = {}, Rows out_rows = {});
  // `rows` rows of `width` values (0: n_embd), `stride` apart (0: packed).
  void rms_norm(const gpu::Buffer& in, const gpu::Buffer& weight, gpu::Buffer& out, int rows, uint32_t width = 0,
                uint32_t stride = 0);
  void elementwise(const char* kernel, gpu::Buffer& into, const gpu::Buffer& other, uint64_t count, uint32_t width);
  void gated_ffn(const DeviceMatrix& gate, const DeviceMatrix& up, const DeviceMatrix& down, const gpu::Buffer& in,
                 gpu::Buffer& out, int rows, int mat = 0);
  void attend(const Segment& s, const gpu::Buffer& queries, const gpu::Buffer& keys, const gpu::Buffer& values,
              gpu::Buffer& out, uint32_t value_dim);
  void grouped_query_attention(const Layer& l, int slot, int n, std::span<const Segment> segments);
  void latent_attention(const Layer& l, int slot, int n, std::span<const Segment> segments);
  Status experts(int layer, int n);
  std::unique_ptr<gpu::Device> device_;
  ModelConfig config_;
  std::vector<bool> on_device_;
  std::vector<int> slot_;  // per model layer: its index among the device layers, or -1
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<DeviceMatrix> output_;
  std::map<TensorType, gpu::Buffer> grids_;  // the points of each grid type the matrices use
  gpu::Buffer output_in_, output_logits_;  // kOutputRows rows at a time
  Rope rope_;
  float attn_scale_ = 1.0f;
  const std::vector<LayerWeights>* weights_ = nullptr;  // the model's, for the experts' routing
  gpu::Buffer x_, xb_, q_, k_, v_, attn_out_, gate_, up_, angles_, none_;
  // Latent attention: the query's bottleneck, the absorbed queries, and
  // each head's attention-weighted latent.
  gpu::Buffer q_a_, q_latent_, latent_out_;
  // A mixture of experts: router logits, the rows of one expert, the sum of
  // the experts' outputs, and the routed rows and weights, expert after expert.
  gpu::Buffer router_logits_, expert_in_, expert_out_, moe_out_, expert_rows_, expert_weights_;
  std::vector<float> angle_rows_, router_rows_, expert_weight_list_;
  std::vector<uint32_t> expert_row_list_;
  ExpertRows routed_;
};

}  // namespace revis
