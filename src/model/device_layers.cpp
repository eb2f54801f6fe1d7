#include "model/device_layers.h"

#include <algorithm>
#include <cmath>

#include "model/routing.h"
#include "quant/quant.h"

namespace revis {
namespace {

// Tokens per chunk the scratch buffers hold: the model's chunk (model.h).
constexpr int kRows = 256;
// Rows of logits the output matrix gives at a time: a row of a 150k
// vocabulary takes 600 KB of device memory.
constexpr int kOutputRows = 16;
// The widest rows the attention shaders hold (attention.comp,
// latent_rope_store.comp): keys of 576 halves, values of 512 (DeepSeek
// V2/V3's latent and RoPE key).
constexpr int kMaxKeyWidth = 576, kMaxValueWidth = 512;

// The weight types the matmul shader is compiled for, by its name suffix.
const char* shader_type(TensorType t) {
  switch (t) {
    case TensorType::F32: return "f32";
    case TensorType::F16: return "f16";
    case TensorType::BF16: return "bf16";
    case TensorType::Q8_0: return "q8_0";
    case TensorType::Q4_0: return "q4_0";
    case TensorType::Q4_1: return "q4_1";
    case TensorType::Q5_0: return "q5_0";
    case TensorType::Q5_1: return "q5_1";
    case TensorType::Q2_K: return "q2_k";
    case TensorType::Q3_K: return "q3_k";
    case TensorType::Q4_K: return "q4_k";
    case TensorType::Q5_K: return "q5_k";
    case TensorType::Q6_K: return "q6_k";
    case TensorType::IQ4_NL: return "iq4_nl";
    case TensorType::IQ4_XS: return "iq4_xs";
    case TensorType::MXFP4: return "mxfp4";
    case TensorType::IQ2_XXS: return "iq2_xxs";
    case TensorType::IQ2_XS: return "iq2_xs";
    case TensorType::IQ2_S: return "iq2_s";
    case TensorType::IQ3_XXS: return "iq3_xxs";
    case TensorType::IQ3_S: return "iq3_s";
    case TensorType::IQ1_S: return "iq1_s";
    case TensorType::IQ1_M: return "iq1_m";
    default: return nullptr;
  }
}

// Groups for `count` workgroups in a grid no side of which passes Vulkan's
// guaranteed 65535.
std::pair<uint32_t, uint32_t> grid(uint64_t count) {
  const uint64_t x = std::min<uint64_t>(std::max<uint64_t>(count, 1), 65535);
  return {static_cast<uint32_t>(x), static_cast<uint32_t>((count + x - 1) / x)};
}

}  // namespace

// A matrix on the device and what the matmul shader needs to read it.
struct DeviceMatrix {
  gpu::Buffer data;
  const gpu::Buffer* grid = nullptr;  // the grid types' points (DeviceLayers::grids_)
  std::string kernel;
  uint32_t rows = 0, cols = 0, row_bytes = 0;  // of one matrix of a stack
};

struct DeviceLayers::Layer {
  gpu::Buffer attn_norm, ffn_norm, q_norm, k_norm, bq, bk, bv;
  DeviceMatrix wq, wk, wv, wo, gate, up, down;
  DeviceMatrix router, gate_exps, up_exps, down_exps;  // a mixture of experts
  DeviceMatrix gate_shexp, up_shexp, down_shexp;       // its shared experts, as one FFN
  gpu::Buffer q_a_norm, kv_a_norm;                     // latent attention
  DeviceMatrix wq_a, wq_b, wkv_a, wk_b, wv_b;
};

namespace {

// The matrices a layer's block multiplies by on the device.
std::vector<const Matrix*> device_matrices(const ModelConfig& c, const LayerWeights& l, int layer) {
  std::vector<const Matrix*> m;
  if (!c.is_mla())
    m = {&l.wq, &l.wk, &l.wv};
  else if (c.mla.q_lora_rank > 0)
    m = {&l.wq_a, &l.wq_b, &l.wkv_a, &l.wk_b, &l.wv_b};
  else
    m = {&l.wq, &l.wkv_a, &l.wk_b, &l.wv_b};
  m.push_back(&l.wo);
  if (!c.is_moe_layer(layer))
    m.insert(m.end(), {&l.w_gate, &l.w_up, &l.w_down});
  else
    m.insert(m.end(), {&l.router, &l.gate_exps, &l.up_exps, &l.down_exps});
  if (c.is_moe_layer(layer) && !l.gate_shexp.empty()) m.insert(m.end(), {&l.gate_shexp, &l.up_shexp, &l.down_shexp});
  return m;
}

// Why the device's attention cannot take this model's heads ("" when it can).
std::string unsupported_heads(const ModelConfig& c) {
  if (c.is_mla()) {
    if (c.head_dim_k > kMaxKeyWidth || c.mla.kv_lora_rank > kMaxValueWidth || c.mla.kv_lora_rank % 2 != 0 ||
        c.rope_dims % 2 != 0)
      return "latent rows of " + std::to_string(c.mla.kv_lora_rank) + " + " + std::to_string(c.rope_dims) +
             " values are not ones the GPU's attention takes (even, a latent of at most " +
             std::to_string(kMaxValueWidth) + " and rows of at most " + std::to_string(kMaxKeyWidth) + ")";
    if (c.attn_temp_scale != 0) return "query temperature is not written for the GPU yet";
    return "";
  }
  if (c.head_dim_k != c.head_dim_v || c.head_dim_k > 256 || c.head_dim_k % 2 != 0 || c.rope_dims > c.head_dim_k ||
      c.n_head % c.n_head_kv != 0)
    return "head shape " + std::to_string(c.head_dim_k) + "/" + std::to_string(c.head_dim_v) +
           " is not one the GPU's attention takes (equal key and value widths, even, at most 256)";
  return "";
}

}  // namespace

std::string DeviceLayers::unsupported(const ModelConfig& c, const LayerWeights& l, int layer,
                                      const gpu::DeviceInfo& device) {
  if (c.arch != Architecture::kLlama && c.arch != Architecture::kQwen2 && c.arch != Architecture::kQwen3 &&
      c.arch != Architecture::kQwen3Moe && c.arch != Architecture::kDeepseek2)
    return std::string("the ") + architecture_name(c.arch) + " block is not written for the GPU yet";
  if (c.is_moe_layer(layer) &&
      (c.expert_gating == ExpertGating::kSqrtSoftplus || c.expert_gating == ExpertGating::kSoftmaxOfChosen ||
       !l.shexp_gate.empty() || !l.gate_exps_bias.empty()))
    return "mixture-of-experts layers with a gated shared expert or this gating are not written for the GPU yet";
  if (std::string why = unsupported_heads(c); !why.empty()) return why;
  if (c.sliding.is_local(layer) || c.has_post_norms || c.gelu_ffn || c.clamped_swiglu || !l.bo.empty() ||
      !l.attn_sinks.empty())
    return "this layer's variant is not written for the GPU yet";
  for (const Matrix* m : device_matrices(c, l, layer))
    if (std::string why = unreadable(*m, device); !why.empty()) return why;
  return "";
}

std::string DeviceLayers::unreadable(const Matrix& m, const gpu::DeviceInfo& device) {
  if (m.empty() || m.stripes) return "a matrix is missing or already in the CPU's stripes";
  if (!shader_type(m.type)) return std::string("weights of type ") + type_name(m.type) + " are not read by the GPU yet";
  if (m.cols % 32 != 0) return "a matrix row of " + std::to_string(m.cols) + " values is not whole groups of 32";
  if (device.max_buffer_bytes > 0 && m.row_bytes * m.rows * m.n_mats > device.max_buffer_bytes)
    return "a matrix of " + std::to_string(m.row_bytes * m.rows * m.n_mats) + " bytes is more than one binding of " +
           device.name + " addresses";
  return "";
}

Result<std::unique_ptr<DeviceLayers>> DeviceLayers::create(std::unique_ptr<gpu::Device> device, const ModelConfig& c,
                                                           const std::vector<LayerWeights>& layers,
                                                           std::vector<bool> on_device, const Rope& rope,
                                                           float attn_scale, const Matrix* output) {
  std::unique_ptr<DeviceLayers> d(new DeviceLayers());
  d->device_ = std::move(device);
  d->config_ = c;
  d->on_device_ = std::move(on_device);
  d->rope_ = rope;
  d->attn_scale_ = attn_scale;
  gpu::Device& dev = *d->device_;

  auto floats = [&](const std::vector<float>& v, const std::string& what) -> Result<gpu::Buffer> {
    auto b = dev.allocate(std::max<size_t>(v.size(), 1) * sizeof(float), what);
    if (!b.ok() || v.empty()) return b;
    if (Status s = dev.write(*b, 0, v.data(), v.size() * sizeof(float)); !s.ok()) return s;
    return b;
  };
  // Each grid type's points, uploaded once from the CPU's own tables.
  auto grid = [&](TensorType type) -> Result<const gpu::Buffer*> {
    const std::span<const std::byte> words = grid_bytes(type);
    if (words.empty()) return nullptr;
    if (auto it = d->grids_.find(type); it != d->grids_.end()) return &it->second;
    auto b = dev.allocate(words.size_bytes(), std::string("the grid of ") + type_name(type));
    if (!b.ok()) return b.status();
    if (Status s = dev.write(*b, 0, words.data(), words.size_bytes()); !s.ok()) return s;
    return &d->grids_.emplace(type, std::move(*b)).first->second;
  };
  auto matrix = [&](const Matrix& m, const std::string& what) -> Result<DeviceMatrix> {
    DeviceMatrix out;
    auto points = grid(m.type);
    if (!points.ok()) return points.status();
    out.grid = *points;
    const size_t bytes = m.row_bytes * m.rows * m.n_mats;
    auto b = dev.allocate(bytes, what);
    if (!b.ok()) return b.status();
    if (Status s = dev.write(*b, 0, m.data, bytes); !s.ok()) return s;
    out.data = std::move(*b);
    out.kernel = std::string("matmul_") + shader_type(m.type);
    out.rows = static_cast<uint32_t>(m.rows);
    out.cols = static_cast<uint32_t>(m.cols);
    out.row_bytes = static_cast<uint32_t>(m.row_bytes);
    return out;
  };

  d->weights_ = &layers;
  d->slot_.assign(c.n_layer, -1);
  for (int i = 0; i < c.n_layer; ++i) {
    if (!d->on_device_[i]) continue;
    const LayerWeights& l = layers[i];
    const std::string name = "layer " + std::to_string(i);
    auto layer = std::make_unique<Layer>();
    Status failed;
    auto take = [&](auto result, auto& into) {
      if (!failed.ok()) return;
      if (!result.ok()) failed = result.status();
      else into = std::move(*result);
    };
    take(floats(l.attn_norm, name + " attn_norm"), layer->attn_norm);
    take(floats(l.ffn_norm, name + " ffn_norm"), layer->ffn_norm);
    take(floats(l.q_norm, name + " q_norm"), layer->q_norm);
    take(floats(l.k_norm, name + " k_norm"), layer->k_norm);
    take(floats(l.bq, name + " bias"), layer->bq);
    take(floats(l.bk, name + " bias"), layer->bk);
    take(floats(l.bv, name + " bias"), layer->bv);
    take(floats(l.q_a_norm, name + " attn_q_a_norm"), layer->q_a_norm);
    take(floats(l.kv_a_norm, name + " attn_kv_a_norm"), layer->kv_a_norm);
    if (!c.is_mla() || c.mla.q_lora_rank == 0) take(matrix(l.wq, name + " attn_q"), layer->wq);
    if (!c.is_mla()) {
      take(matrix(l.wk, name + " attn_k"), layer->wk);
      take(matrix(l.wv, name + " attn_v"), layer->wv);
    } else {
      if (c.mla.q_lora_rank > 0) {
        take(matrix(l.wq_a, name + " attn_q_a"), layer->wq_a);
        take(matrix(l.wq_b, name + " attn_q_b"), layer->wq_b);
      }
      take(matrix(l.wkv_a, name + " attn_kv_a_mqa"), layer->wkv_a);
      take(matrix(l.wk_b, name + " attn_k_b"), layer->wk_b);
      take(matrix(l.wv_b, name + " attn_v_b"), layer->wv_b);
    }
    take(matrix(l.wo, name + " attn_output"), layer->wo);
    if (c.is_moe_layer(i)) {
      take(matrix(l.router, name + " ffn_gate_inp"), layer->router);
      take(matrix(l.gate_exps, name + " ffn_gate_exps"), layer->gate_exps);
      take(matrix(l.up_exps, name + " ffn_up_exps"), layer->up_exps);
      take(matrix(l.down_exps, name + " ffn_down_exps"), layer->down_exps);
      if (!l.gate_shexp.empty()) {
        take(matrix(l.gate_shexp, name + " ffn_gate_shexp"), layer->gate_shexp);
        take(matrix(l.up_shexp, name + " ffn_up_shexp"), layer->up_shexp);
        take(matrix(l.down_shexp, name + " ffn_down_shexp"), layer->down_shexp);
      }
    } else {
      take(matrix(l.w_gate, name + " ffn_gate"), layer->gate);
      take(matrix(l.w_up, name + " ffn_up"), layer->up);
      take(matrix(l.w_down, name + " ffn_down"), layer->down);
    }
    if (!failed.ok()) return failed;
    d->slot_[i] = static_cast<int>(d->layers_.size());
    d->layers_.push_back(std::move(layer));
  }

  size_t ff = std::max({c.n_ff, c.n_ff_expert, 1});
  for (const LayerWeights& l : layers) ff = std::max<size_t>(ff, l.gate_shexp.rows);
  const size_t rows = kRows, experts = std::max(c.n_expert, 1), heads = c.n_head;
  struct Scratch {
    gpu::Buffer* buffer;
    size_t floats;
  };
  for (const Scratch& s : {Scratch{&d->x_, rows * c.n_embd}, Scratch{&d->xb_, rows * c.n_embd},
                           Scratch{&d->q_, rows * c.q_dim()}, Scratch{&d->k_, rows * c.kv_dim_k()},
                           Scratch{&d->v_, rows * c.kv_dim_v()},
                           Scratch{&d->attn_out_, rows * std::max(c.q_dim(), c.n_head * c.mla.head_dim_v)},
                           Scratch{&d->q_a_, rows * c.mla.q_lora_rank},
                           Scratch{&d->q_latent_, c.is_mla() ? rows * heads * c.head_dim_k : 0},
                           Scratch{&d->latent_out_, rows * heads * c.mla.kv_lora_rank},
                           Scratch{&d->gate_, rows * ff}, Scratch{&d->up_, rows * ff},
                           Scratch{&d->angles_, rows * std::max(c.rope_dims, 2)}, Scratch{&d->none_, 4},
                           Scratch{&d->router_logits_, rows * experts}, Scratch{&d->expert_in_, rows * c.n_embd},
                           Scratch{&d->expert_out_, rows * c.n_embd}, Scratch{&d->moe_out_, rows * c.n_embd},
                           Scratch{&d->expert_rows_, rows * std::max(c.n_expert_used, 1)},
                           Scratch{&d->expert_weights_, rows * std::max(c.n_expert_used, 1)}}) {
    auto b = dev.allocate(std::max<size_t>(s.floats, 1) * sizeof(float), "scratch rows");
    if (!b.ok()) return b.status();
    *s.buffer = std::move(*b);
  }
  if (output) {
    auto m = matrix(*output, "the output matrix");
    if (!m.ok()) return m.status();
    d->output_ = std::make_unique<DeviceMatrix>(std::move(*m));
    auto in = dev.allocate(kOutputRows * c.n_embd * sizeof(float), "output rows");
    if (!in.ok()) return in.status();
    auto logits = dev.allocate(kOutputRows * static_cast<size_t>(c.n_vocab) * sizeof(float), "logits");
    if (!logits.ok()) return logits.status();
    d->output_in_ = std::move(*in);
    d->output_logits_ = std::move(*logits);
  }
  return d;
}

Status DeviceLayers::output(const float* rows, int m, float* logits) {
  const size_t d = config_.n_embd, n_vocab = config_.n_vocab;
  for (int first = 0; first < m; first += kOutputRows) {
    const int count = std::min(kOutputRows, m - first);
    if (Status s = device_->write(output_in_, 0, rows + first * d, count * d * sizeof(float)); !s.ok()) return s;
    device_->begin();
    matmul(*output_, output_in_, output_logits_, count);
    if (Status s = device_->run(); !s.ok()) return s.with_context("GPU " + device_->info().name);
    if (Status s = device_->read(output_logits_, 0, logits + first * n_vocab, count * n_vocab * sizeof(float)); !s.ok())
      return s;
  }
  return {};
}

DeviceLayers::~DeviceLayers() = default;

int DeviceLayers::layer_count() const { return static_cast<int>(layers_.size()); }

// Makes kv's device rows [0, n_past) valid: allocates its device cache on
// first use, and copies up the host rows the device lacks.
Status DeviceLayers::prepare_cache(KvCache& kv, int n_past) {
  const ModelConfig& c = config_;
  const size_t hd = c.head_dim_k, head_bytes = static_cast<size_t>(kv.n_ctx()) * hd * sizeof(uint16_t);
  if (!kv.device_kv) {
    auto mirror = std::make_unique<DeviceKv>();
    for (int i = 0; i < c.n_layer; ++i) {
      if (slot_[i] < 0) continue;
      // The device keeps rows by position; a ring (kv_cache.h) has none to
      // mirror, and unsupported() leaves sliding-window layers here.
      if (kv.shape(c.kv_layer(i)).ring)
        return Status::error("layer " + std::to_string(i) + " keeps a ring of rows, which the GPU does not mirror");
      const std::string what = "the KV cache of layer " + std::to_string(i) + " (" + std::to_string(kv.n_ctx()) +
                               " positions; lower -c or -ngl)";
      auto keys = device_->allocate(head_bytes * c.n_head_kv, what);
      if (!keys.ok()) return keys.status();
      mirror->keys.push_back(std::move(*keys));
      gpu::Buffer values;
      if (!c.values_in_keys()) {
        auto allocated = device_->allocate(head_bytes * c.n_head_kv, what);
        if (!allocated.ok()) return allocated.status();
        values = std::move(*allocated);
      }
      mirror->values.push_back(std::move(values));
    }
    // Whatever the cache holds so far came from the host (a checkpoint).
    mirror->host_rows = n_past;
    kv.device_kv = std::move(mirror);
  }
  DeviceKv& m = *kv.device_kv;
  if (m.device_rows < n_past) {
    if (m.host_rows < n_past)
      return Status::error("the GPU's cache lacks positions " + std::to_string(m.device_rows) + ".." +
                           std::to_string(n_past - 1) + " and the host's has only " + std::to_string(m.host_rows));
    if (Status s = copy_rows(kv, m.device_rows, n_past - m.device_rows, /*to_device=*/true); !s.ok()) return s;
    m.device_rows = n_past;
  }
  return {};
}

// Positions [from, from + count) of every device layer's keys and values
// (the key rows alone where they hold the values), between kv's host rows
// and its device cache, one run per KV head.
Status DeviceLayers::copy_rows(KvCache& kv, int from, int count, bool to_device) {
  const ModelConfig& c = config_;
  const size_t row_bytes = static_cast<size_t>(c.head_dim_k) * sizeof(uint16_t), bytes = count * row_bytes;
  DeviceKv& m = *kv.device_kv;
  for (int i = 0; i < c.n_layer; ++i) {
    if (slot_[i] < 0) continue;
    for (int h = 0; h < c.n_head_kv; ++h) {
      const size_t offset = (static_cast<size_t>(h) * kv.n_ctx() + from) * row_bytes;
      for (auto [device_rows, host_rows] : {std::pair{&m.keys[slot_[i]], kv.key(i, h, from)},
                                            std::pair{&m.values[slot_[i]], kv.value(i, h, from)}}) {
        if (device_rows->empty()) continue;
        Status s = to_device ? device_->write(*device_rows, offset, host_rows, bytes)
                             : device_->read(*device_rows, offset, host_rows, bytes);
        if (!s.ok()) return s;
      }
    }
  }
  return {};
}

Status DeviceLayers::sync_to_host(KvCache& kv) {
  if (!kv.device_kv) return {};
  DeviceKv& m = *kv.device_kv;
  if (m.host_rows >= m.device_rows) return {};
  if (Status s = copy_rows(kv, m.host_rows, m.device_rows - m.host_rows, /*to_device=*/false); !s.ok()) return s;
  m.host_rows = m.device_rows;
  return {};
}

// One matrix (of a stack: `mat`) over `tokens` rows of `in`.
void DeviceLayers::matmul(const DeviceMatrix& m, const gpu::Buffer& in, gpu::Buffer& out, int tokens, int mat,
                          Rows in_rows, Rows out_rows) {
  struct Push {
    uint32_t rows, cols, tokens, row_bytes, x_offset, x_stride, o_offset, o_stride, w_offset;
  };
  const Push p{m.rows,
               m.cols,
               static_cast<uint32_t>(tokens),
               m.row_bytes,
               in_rows.offset,
               in_rows.stride > 0 ? in_rows.stride : m.cols,
               out_rows.offset,
               out_rows.stride > 0 ? out_rows.stride : m.rows,
               static_cast<uint32_t>(mat) * m.rows * m.row_bytes};
  const auto [gx, gy] = grid(m.rows);
  device_->dispatch(m.kernel, {&m.data, &in, &out, m.grid ? m.grid : &none_}, &p, sizeof p, gx, gy);
}

void DeviceLayers::rms_norm(const gpu::Buffer& in, const gpu::Buffer& weight, gpu::Buffer& out, int rows,
                            uint32_t width, uint32_t stride) {
  struct Push {
    uint32_t width, stride, x_offset, o_offset;
    float eps;
  };
  if (width == 0) width = config_.n_embd;
  const Push p{width, stride > 0 ? stride : width, 0, 0, config_.rms_eps};
  device_->dispatch("rms_norm", {&in, &weight, &out}, &p, sizeof p, rows);
}

// `kernel` over `count` values: add (into += other, other a row of `width`
// when width > 0), swiglu (into = silu(into) * other).
void DeviceLayers::elementwise(const char* kernel, gpu::Buffer& into, const gpu::Buffer& other, uint64_t count,
                               uint32_t width) {
  struct Push {
    uint32_t n, width, x_offset;
  };
  const Push p{static_cast<uint32_t>(count), width, 0};
  const auto [gx, gy] = grid((count + 255) / 256);
  device_->dispatch(kernel, {&into, &other}, &p, sizeof p, gx, gy);
}

// out = W_down (silu(W_gate in) * W_up in) for `rows` rows (matrices `mat`
// of stacks); out may be in.
void DeviceLayers::gated_ffn(const DeviceMatrix& gate, const DeviceMatrix& up, const DeviceMatrix& down,
                             const gpu::Buffer& in, gpu::Buffer& out, int rows, int mat) {
  matmul(gate, in, gate_, rows, mat);
  matmul(up, in, up_, rows, mat);
  elementwise("swiglu", gate_, up_, static_cast<uint64_t>(rows) * gate.rows, 0);
  matmul(down, gate_, out, rows, mat);
}

// The mixture of experts of `layer` over the chunk's n rows of xb_ (normed),
// added into x_. The router runs on the device; its logits come back to
// choose the experts as the CPU does (routing.h: every gating's weights,
// normalised and scaled there); each chosen expert then runs once over the
// rows routed to it, gathered side by side, and its weighted outputs go
// back into their rows in expert order. Shared experts (deepseek2) then
// take every row, their output added unweighted, as on the CPU.
Status DeviceLayers::experts(int layer, int n) {
  const ModelConfig& c = config_;
  const Layer& l = *layers_[slot_[layer]];
  matmul(l.router, xb_, router_logits_, n);
  if (Status s = device_->run(); !s.ok()) return s;
  router_rows_.resize(static_cast<size_t>(n) * c.n_expert);
  if (Status s = device_->read(router_logits_, 0, router_rows_.data(), router_rows_.size() * sizeof(float)); !s.ok())
    return s;
  choose_experts(c, (*weights_)[layer], router_rows_.data(), n, routed_);
  expert_row_list_.clear();
  expert_weight_list_.clear();
  for (const auto& rows : routed_)
    for (const auto& [row, weight] : rows) {
      expert_row_list_.push_back(static_cast<uint32_t>(row));
      expert_weight_list_.push_back(weight);
    }
  const size_t routed = expert_row_list_.size();
  if (Status s = device_->write(expert_rows_, 0, expert_row_list_.data(), routed * sizeof(uint32_t)); !s.ok()) return s;
  if (Status s = device_->write(expert_weights_, 0, expert_weight_list_.data(), routed * sizeof(float)); !s.ok())
    return s;

  device_->begin();
  struct Push {
    uint32_t width, count, first;
  };
  const uint32_t d = c.n_embd;
  const Push zero{static_cast<uint32_t>(n) * d, 0, 0};
  const auto [zx, zy] = grid((zero.width + 255) / 256);
  device_->dispatch("zero", {&moe_out_}, &zero, sizeof zero, zx, zy);
  uint32_t first = 0;
  for (int e = 0; e < c.n_expert; ++e) {
    const int m = static_cast<int>(routed_[e].size());
    if (m == 0) continue;
    const Push rows{d, static_cast<uint32_t>(m), first};
    const auto [gx, gy] = grid((static_cast<uint64_t>(m) * d + 255) / 256);
    device_->dispatch("gather_rows", {&xb_, &expert_rows_, &expert_in_}, &rows, sizeof rows, gx, gy);
    gated_ffn(l.gate_exps, l.up_exps, l.down_exps, expert_in_, expert_out_, m, e);
    device_->dispatch("scatter_add", {&moe_out_, &expert_out_, &expert_rows_, &expert_weights_}, &rows, sizeof rows, gx,
                      gy);
    first += static_cast<uint32_t>(m);
  }
  if (!l.gate_shexp.data.empty()) {
    gated_ffn(l.gate_shexp, l.up_shexp, l.down_shexp, xb_, expert_out_, n);
    elementwise("add", moe_out_, expert_out_, static_cast<uint64_t>(n) * d, 0);
  }
  elementwise("add", x_, moe_out_, static_cast<uint64_t>(n) * d, 0);
  return {};
}

// Segment s's rows of `queries` (n_head heads of the cache's key width)
// against its cache: each head's softmax-weighted values, value_dim wide,
// into `out`.
void DeviceLayers::attend(const Segment& s, const gpu::Buffer& queries, const gpu::Buffer& keys,
                          const gpu::Buffer& values, gpu::Buffer& out, uint32_t value_dim) {
  const ModelConfig& c = config_;
  struct Push {
    uint32_t row0, n_past, n_head, n_head_kv, head_dim, n_ctx, value_dim;
    float scale;
  };
  const Push p{static_cast<uint32_t>(s.row),       static_cast<uint32_t>(s.n_past),
               static_cast<uint32_t>(c.n_head),    static_cast<uint32_t>(c.n_head_kv),
               static_cast<uint32_t>(c.head_dim_k), static_cast<uint32_t>(s.kv->n_ctx()),
               value_dim,                          attn_scale_};
  device_->dispatch("attention", {&queries, &keys, &values, &out}, &p, sizeof p, s.n, c.n_head);
}

// Llama/Qwen attention over xb_ into attn_out_: Q, K and V (plus their
// biases), QK-norm and RoPE, the keys and values into each segment's cache,
// then attention segment by segment.
void DeviceLayers::grouped_query_attention(const Layer& l, int slot, int n, std::span<const Segment> segments) {
  const ModelConfig& c = config_;
  matmul(l.wq, xb_, q_, n);
  matmul(l.wk, xb_, k_, n);
  matmul(l.wv, xb_, v_, n);
  if (c.has_qkv_bias) {
    elementwise("add", q_, l.bq, static_cast<uint64_t>(n) * c.q_dim(), c.q_dim());
    elementwise("add", k_, l.bk, static_cast<uint64_t>(n) * c.kv_dim_k(), c.kv_dim_k());
    elementwise("add", v_, l.bv, static_cast<uint64_t>(n) * c.kv_dim_v(), c.kv_dim_v());
  }
  struct Push {
    uint32_t row0, n_past, n_head, n_head_kv, head_dim, rope_dims, neox, qk_norm, n_ctx, angle_row0;
    float eps;
  };
  for (const Segment& s : segments) {
    DeviceKv& m = *s.kv->device_kv;
    const Push p{static_cast<uint32_t>(s.row), static_cast<uint32_t>(s.n_past), static_cast<uint32_t>(c.n_head),
                 static_cast<uint32_t>(c.n_head_kv), static_cast<uint32_t>(c.head_dim_k),
                 static_cast<uint32_t>(c.rope_dims), c.rope_layout == RopeLayout::kNeox ? 1u : 0u,
                 c.has_qk_norm ? 1u : 0u, static_cast<uint32_t>(s.kv->n_ctx()), static_cast<uint32_t>(s.row),
                 c.rms_eps};
    device_->dispatch("rope_store",
                      {&q_, &k_, &v_, c.has_qk_norm ? &l.q_norm : &none_, c.has_qk_norm ? &l.k_norm : &none_,
                       &angles_, &m.keys[slot], &m.values[slot]},
                      &p, sizeof p, s.n, c.n_head + c.n_head_kv);
  }
  for (const Segment& s : segments) {
    DeviceKv& m = *s.kv->device_kv;
    attend(s, q_, m.keys[slot], m.values[slot], attn_out_, c.head_dim_v);
  }
}

// DeepSeek's multi-head latent attention over xb_ into attn_out_, in the
// CPU's absorbed form (model/attention.cpp's latent_attention): the query
// through its bottleneck; the cached row [norm(latent) | RoPE key]; each
// head's query carried into the latent's space by attn_k_b beside its
// turned RoPE part; attention over the cached rows, the latent serving as
// the value; attn_v_b taking each head's value out of its weighted latent.
void DeviceLayers::latent_attention(const Layer& l, int slot, int n, std::span<const Segment> segments) {
  const ModelConfig& c = config_;
  const Mla& mla = c.mla;
  const uint32_t heads = c.n_head, latent = mla.kv_lora_rank, row = c.head_dim_k, hq = c.head_dim_q();
  if (mla.q_lora_rank > 0) {
    matmul(l.wq_a, xb_, q_a_, n);
    rms_norm(q_a_, l.q_a_norm, q_a_, n, mla.q_lora_rank);
    matmul(l.wq_b, q_a_, q_, n);
  } else {
    matmul(l.wq, xb_, q_, n);
  }
  matmul(l.wkv_a, xb_, k_, n);
  rms_norm(k_, l.kv_a_norm, k_, n, latent, row);
  for (uint32_t h = 0; h < heads; ++h)
    matmul(l.wk_b, q_, q_latent_, n, static_cast<int>(h), {h * hq, heads * hq}, {h * row, heads * row});
  struct Push {
    uint32_t row0, n_past, n_head, latent, rope_dims, nope, neox, angle_row0;
  };
  for (const Segment& s : segments) {
    const Push p{static_cast<uint32_t>(s.row),
                 static_cast<uint32_t>(s.n_past),
                 heads,
                 latent,
                 static_cast<uint32_t>(c.rope_dims),
                 static_cast<uint32_t>(mla.head_dim_nope),
                 c.rope_layout == RopeLayout::kNeox ? 1u : 0u,
                 static_cast<uint32_t>(s.row)};
    device_->dispatch("latent_rope_store", {&q_, &q_latent_, &k_, &angles_, &s.kv->device_kv->keys[slot]}, &p,
                      sizeof p, s.n, heads + 1);
  }
  for (const Segment& s : segments) {
    const gpu::Buffer& rows = s.kv->device_kv->keys[slot];
    attend(s, q_latent_, rows, rows, latent_out_, latent);
  }
  const uint32_t dv = mla.head_dim_v;
  for (uint32_t h = 0; h < heads; ++h)
    matmul(l.wv_b, latent_out_, attn_out_, n, static_cast<int>(h), {h * latent, heads * latent},
           {h * dv, heads * dv});
}

Status DeviceLayers::run(float* x, int n, std::span<const Segment> segments, int first, int last) {
  const ModelConfig& c = config_;
  gpu::Device& dev = *device_;
  const uint32_t d = c.n_embd;
  // RoPE's cos and sin for every row, from the host's angles (rope.h).
  const int pairs = c.rope_dims / 2;
  angle_rows_.assign(static_cast<size_t>(n) * pairs * 2, 0.0f);
  const float mag = rope_.magnitude();
  for (const Segment& s : segments) {
    for (int t = 0; t < s.n; ++t)
      rope_.for_each_angle(s.n_past + t, [&](int i, float theta) {
        float* cs = &angle_rows_[(static_cast<size_t>(s.row + t) * pairs + i) * 2];
        cs[0] = std::cos(theta) * mag;
        cs[1] = std::sin(theta) * mag;
      });
    if (Status st = prepare_cache(*s.kv, s.n_past); !st.ok()) return st;
  }
  if (Status s = dev.write(x_, 0, x, static_cast<size_t>(n) * d * sizeof(float)); !s.ok()) return s;
  if (pairs > 0)
    if (Status s = dev.write(angles_, 0, angle_rows_.data(), angle_rows_.size() * sizeof(float)); !s.ok()) return s;

  dev.begin();
  for (int i = first; i < last; ++i) {
    const Layer& l = *layers_[slot_[i]];
    rms_norm(x_, l.attn_norm, xb_, n);
    if (c.is_mla())
      latent_attention(l, slot_[i], n, segments);
    else
      grouped_query_attention(l, slot_[i], n, segments);
    matmul(l.wo, attn_out_, xb_, n);
    elementwise("add", x_, xb_, static_cast<uint64_t>(n) * d, 0);
    rms_norm(x_, l.ffn_norm, xb_, n);
    if (c.is_moe_layer(i)) {
      if (Status s = experts(i, n); !s.ok()) return s;
      continue;
    }
    gated_ffn(l.gate, l.up, l.down, xb_, xb_, n);
    elementwise("add", x_, xb_, static_cast<uint64_t>(n) * d, 0);
  }
  if (Status s = dev.run(); !s.ok()) return s.with_context("GPU " + dev.info().name);
  for (const Segment& s : segments) {
    DeviceKv& m = *s.kv->device_kv;
    m.device_rows = s.n_past + s.n;
    m.host_rows = std::min(m.host_rows, s.n_past);
  }
  return dev.read(x_, 0, x, static_cast<size_t>(n) * d * sizeof(float));
}

}  // namespace revis
