// The transformer forward pass shared by llama, qwen2, qwen3, qwen3moe,
// deepseek2, gemma3, gemma4, gpt-oss, qwen35, qwen35moe and qwen3next; deepseek4
// shares its embedding and output (its blocks: deepseek4.cpp).
// Read forward_chunk() top to bottom: embed, then per layer attention and
// feed-forward with residual connections, then the output projection.
//
// Gemma 3 adds to that path (config.h's gemma3 fields): the embeddings
// times sqrt(n_embd); an RMS norm on the output of attention and of the FFN
// before each joins the residual; a GELU-gated FFN; queries scaled after
// RoPE rather than the scores; sliding-window layers with their own RoPE,
// which see only the last `window` positions and keep only a ring of rows
// a little longer than that (kv_cache.h).
//
// Gemma 4 (config.h's Gemma4) is Gemma 3's path with unscaled attention
// scores, RMS-normed values, and a step after each block (gemma4.cpp):
// the block's per-layer embedding and output factor; its shared layers
// read an earlier layer's cache (attention.cpp); its mixture of experts
// runs beside the dense FFN (gemma4.cpp).
//
// gpt-oss (config.h's gpt-oss fields) alternates sliding-window and global
// layers like gemma3 but turns both with the file's YaRN RoPE; adds a bias
// after every matrix but the output, a sink logit per head to attention's
// softmax (attention.cpp), and routes each token to the top k experts by
// logit, weighted by a softmax over those k.
// The hybrids qwen35, qwen35moe and qwen3next (config.h's GatedDeltaNet)
// run most layers as gated delta-nets (delta_net.cpp) in place of
// attention; their attention layers gate their output by sigmoid(gate), a
// second half of each query head (attention.cpp), and qwen35's turn RoPE
// by M-RoPE's sections (rope.h). Their FFN's norm, like gpt-oss's, is
// stored as post_attention_norm.
#include "model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>

#include "model/ops.h"
#include "model/striped_weights.h"
#include "quant/quant.h"

namespace revis {
namespace {

// Prompts are processed in chunks so scratch memory stays bounded (about
// 0.1-0.2 MiB per token for 1-8B models) while each weight row is reused
// across many tokens. The chunk is also how many tokens a matrix product's
// tile of weight rows meets: with 64, AVX2's repacking of Q8_0 tiles
// (matmul.h) cost 6% of the prefill time, and Q8_0 prompts on AVX2 ran at
// about the speed they had before the repacking; with 256, 12-20% faster.
// A mixture of experts gains more: each expert meets a chunk's tokens that
// chose it, 16 on average for 8 of 128 experts.
//
// A chunk may hold several sequences' tokens (a batch): their rows share
// every matrix product, and each meets its own cache in attention.

uint64_t matrix_bytes(const Matrix& m) { return m.empty() ? 0 : m.row_bytes * m.rows * m.n_mats; }

}  // namespace

Result<std::unique_ptr<Model>> Model::load(std::shared_ptr<const gguf::GgufFile> file) {
  std::unique_ptr<Model> model(new Model());
  auto config = read_model_config(*file);
  if (!config.ok()) return config.status().with_context(file->path());
  model->config_ = *config;
  auto weights = load_model_weights(*file, model->config_);
  if (!weights.ok()) return weights.status().with_context(file->path());
  model->weights_ = std::move(*weights);
  model->file_ = std::move(file);

  model->set_up_rope_and_scale();
  model->matmul_.set_stepwise(true);  // batch invariance (model.h)
  return model;
}

Result<uint64_t> Model::keep_weights_in_stripes() {
  // The embeddings are still looked up in the file's copy (and a tied
  // output's stored rows are theirs).
  std::vector<const uint8_t*> kept = {weights_.token_embd.data};
  for (const NextnWeights& n : weights_.nextn) kept.push_back(n.embed.data);
  std::unordered_map<const uint8_t*, const gguf::TensorInfo*> tensor_at;
  for (const gguf::TensorInfo& t : file_->tensors()) tensor_at.emplace(t.data, &t);
  auto give_back = [&](const uint8_t* data) {
    if (std::find(kept.begin(), kept.end(), data) != kept.end()) return;
    if (auto it = tensor_at.find(data); it != tensor_at.end()) {
      file_->release(*it->second);
      released_.push_back(data);
    }
    // Rows cut from a file's tensor at load (weights.h's derived_rows).
    for (std::vector<uint8_t>& rows : weights_.derived_rows)
      if (rows.data() == data) std::vector<uint8_t>().swap(rows);
  };
  std::vector<bool> on_device(config_.n_layer, false);
  for (int i = 0; device_ && i < config_.n_layer; ++i) on_device[i] = device_->runs(i);
  auto striped = stripe_weights(weights_, give_back, on_device);
  if (!striped.ok()) return striped.status().with_context(file_->path());
  // The layers a GPU runs read its copy of their matrices: the file's goes back.
  for (int i = 0; i < config_.n_layer; ++i)
    if (on_device[i])
      for (const Matrix* m : weights_.layers[i].matrices())
        if (!m->empty()) give_back(m->data);
  // The tensors split at load are read no more: their rows are the
  // derived matrices' (in stripes now, or still in derived_rows).
  for (const uint8_t* data : weights_.split_sources) give_back(data);
  std::sort(released_.begin(), released_.end());
  striped_memory_ = std::move(striped->memory);
  return striped->matrices;
}

bool Model::reads_in_stripes(const gguf::TensorInfo& t) const {
  return std::binary_search(released_.begin(), released_.end(), t.data);
}

// The attention scores' factor: 1/sqrt(key width), and for DeepSeek YaRN's
// magnitude gain squared, with its mscale_all_dim share (rope.cpp), the
// float steps as in llama.cpp's deepseek2 graph.
void Model::set_up_rope_and_scale() {
  const ModelConfig& c = config_;
  rope_ = Rope(c, weights_.rope_freq_factors);
  const int key_width = c.head_dim_q();
  attn_scale_ = c.attn_scale > 0 ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(key_width));
  if (c.is_deepseek4()) {
    // Raw blocks rotate at the file's base without scaling; compressing
    // blocks at their own base with the YaRN settings, whose magnitude
    // gain llama.cpp cancels through attn_factor.
    ModelConfig raw = c, compressed = c;
    raw.rope_yarn = false;
    raw.rope_freq_scale = 1.0f;
    raw.yarn.attn_factor = 1.0f;
    rope_ = Rope(raw, {});
    compressed.rope_base = c.ds4.compress_rope_base;
    if (c.rope_yarn) compressed.yarn.attn_factor = 1.0f / (1.0f + 0.1f * std::log(1.0f / c.rope_freq_scale));
    compressed_rope_ = Rope(compressed, {});
  }
  if (c.arch == Architecture::kGemma3 || c.is_gemma4()) {
    // Local layers: their own base (gemma4: and rotated width), no scaling;
    // gemma4's rope_freqs are its global layers' alone.
    ModelConfig local = c;
    local.rope_base = c.sliding.rope_base;
    local.rope_freq_scale = 1.0f;
    local.rope_yarn = false;
    local.yarn = Yarn{};
    if (c.is_gemma4()) local.rope_dims = c.gemma4.rope_dims_local;
    local_rope_ = Rope(local, {});
  }
  if (c.arch == Architecture::kGemma3) {
    // Gemma 3 27B (62 layers) scales by its width per head, n_embd / n_head,
    // the others by the key width (as llama.cpp, after gemma_pytorch).
    const int width = c.n_layer == 62 ? c.n_embd / c.n_head : key_width;
    query_scale_ = 1.0f / std::sqrt(static_cast<float>(width));
    attn_scale_ = 1.0f;
  }
  if (c.arch == Architecture::kGptOss) {
    ModelConfig local = c;
    local.rope_base = c.sliding.rope_base;
    local_rope_ = Rope(local, {});
  }
  if (c.arch == Architecture::kDeepseek2) {
    const float factor = 1.0f / c.rope_freq_scale;
    const float mscale_all_dim = c.yarn.log_multiplier / 0.1f;
    const float mscale = rope_.magnitude() * (1.0f + 0.1f * mscale_all_dim * std::log(factor));
    attn_scale_ = mscale * mscale / std::sqrt(static_cast<float>(key_width));
  }
}

uint64_t Model::bytes_per_token() const {
  const ModelConfig& c = config_;
  // One row of each embedding table (gemma4's per-layer one too).
  uint64_t total = matrix_bytes(weights_.output) + weights_.token_embd.row_bytes + weights_.per_layer_embd.row_bytes +
                   matrix_bytes(weights_.per_layer_model_proj);
  for (const LayerWeights& l : weights_.layers)
    for (const Matrix* m : l.matrices())
      // A token reads n_expert_used of a stack's n_expert matrices.
      total += l.is_expert_stack(*m) ? (c.n_expert > 0 ? matrix_bytes(*m) / c.n_expert * c.n_expert_used : 0)
                                     : matrix_bytes(*m);
  total += matrix_bytes(weights_.hc_head.fn);
  // deepseek4's blocks; its multi-token-prediction block (after them) aside.
  for (size_t i = 0; i < std::min(weights_.ds4_layers.size(), static_cast<size_t>(c.n_layer)); ++i) {
    const Deepseek4Layer& l = weights_.ds4_layers[i];
    for (const Matrix* m : l.matrices())
      total += l.is_expert_stack(*m) ? matrix_bytes(*m) / c.n_expert * c.n_expert_used : matrix_bytes(*m);
  }
  return total;
}

Status Model::check_batch(std::span<const int32_t> tokens, int n_past, const KvCache& kv) const {
  const int n = static_cast<int>(tokens.size());
  if (n == 0) return Status::error("forward: no tokens to evaluate");
  if (n_past < 0 || n_past + n > kv.n_ctx())
    return Status::error("context full: " + std::to_string(n_past + n) + " tokens do not fit in a context of " +
                         std::to_string(kv.n_ctx()) + " (raise -c)");
  for (int32_t t : tokens)
    if (t < 0 || t >= config_.n_vocab)
      return Status::error("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                           std::to_string(config_.n_vocab - 1) + ")");
  if (config_.is_hybrid() && !kv.recurrent_state().empty() && n_past != 0 && n_past != kv.recurrent_pos())
    return Status::error("forward: the recurrent state stands at position " + std::to_string(kv.recurrent_pos()) +
                         ", not " + std::to_string(n_past) + " (" + architecture_name(config_.arch) +
                         "'s recurrent layers cannot go back; start again at 0)");
  if (const CompressorCache* cc = kv.compressor(); cc && !cc->can_continue(n_past))
    return Status::error("forward: deepseek4's compressor state stands at position " + std::to_string(cc->stands_at()) +
                         ", not " + std::to_string(n_past) +
                         " (evaluate the tokens in between again, or restore a resume point)");
  if (!kv.can_continue_at(n_past))
    return Status::error("forward: the sliding-window layers hold positions " + std::to_string(kv.ring_first()) +
                         ".." + std::to_string(kv.recurrent_pos() - 1) + ", not the window before position " +
                         std::to_string(n_past) + " (start again at 0)");
  return {};
}

void Model::begin_recurrent(int n_past, KvCache& kv) const {
  if (config_.is_hybrid() && n_past == 0) kv.reset_recurrent();
  if (kv.compressor() && n_past == 0) kv.compressor()->restore_resume_point(0);
}

void Model::end_recurrent(int n_past, int n, KvCache& kv) const { kv.wrote(n_past, n); }

Status Model::forward(std::span<const int32_t> tokens, int n_past, KvCache& kv, ThreadPool& pool, bool all_logits,
                      std::vector<float>& logits) {
  const SequenceInput one{tokens, n_past, &kv, all_logits, &logits};
  return forward({&one, 1}, pool);
}

Status Model::forward(std::span<const SequenceInput> batch, ThreadPool& pool) {
  if (batch.empty()) return Status::error("forward: no sequences to evaluate");
  int total = 0;
  for (const SequenceInput& seq : batch) {
    if (Status s = check_batch(seq.tokens, seq.n_past, *seq.kv); !s.ok()) return s;
    for (const SequenceInput& other : batch)
      if (&other != &seq && other.kv == seq.kv) return Status::error("forward: two sequences of a batch share a cache");
    total += static_cast<int>(seq.tokens.size());
  }
  for (const SequenceInput& seq : batch) {
    if (seq.logits) seq.logits->assign((seq.all_logits ? seq.tokens.size() : 1) * config_.n_vocab, 0.0f);
    begin_recurrent(seq.n_past, *seq.kv);
  }
  // A decoding step of one sequence: how its products prefetch is tuned by
  // timing steps.
  const bool step = total == 1;
  if (step) matmul_.set_prefetch(prefetch_tuner_.mode());
  const auto began = std::chrono::steady_clock::now();
  // Chunks of up to kChunk tokens, the sequences' tokens one after another.
  std::vector<Segment> segments;
  Status failed;
  auto run_chunk = [&] {
    if (failed.ok()) failed = forward_chunk(chunk_tokens_.data(), static_cast<int>(chunk_tokens_.size()), segments, pool);
    chunk_tokens_.clear();
    segments.clear();
  };
  for (const SequenceInput& seq : batch) {
    const int n = static_cast<int>(seq.tokens.size());
    for (int first = 0; first < n;) {
      const int room = kChunk - static_cast<int>(chunk_tokens_.size());
      const int len = std::min(room, n - first);
      segments.push_back({seq.kv, seq.n_past + first, static_cast<int>(chunk_tokens_.size()), len, &seq, first});
      chunk_tokens_.insert(chunk_tokens_.end(), seq.tokens.begin() + first, seq.tokens.begin() + first + len);
      first += len;
      if (static_cast<int>(chunk_tokens_.size()) == kChunk) run_chunk();
    }
  }
  if (!segments.empty()) run_chunk();
  for (const SequenceInput& seq : batch) end_recurrent(seq.n_past, static_cast<int>(seq.tokens.size()), *seq.kv);
  if (step) prefetch_tuner_.record(std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  return failed;
}

Status Model::forward_hidden(std::span<const int32_t> tokens, int n_past, KvCache& kv, ThreadPool& pool,
                             std::span<float> sum) {
  if (Status s = check_batch(tokens, n_past, kv); !s.ok()) return s;
  if (sum.size() != static_cast<size_t>(config_.n_embd))
    return Status::error("forward_hidden: the sum holds " + std::to_string(sum.size()) + " values, the model's width is " +
                         std::to_string(config_.n_embd));
  const int n = static_cast<int>(tokens.size());
  begin_recurrent(n_past, kv);
  for (int start = 0; start < n; start += kChunk) {
    const Segment segment{&kv, n_past + start, 0, std::min(kChunk, n - start)};
    if (Status s = forward_chunk(tokens.data() + start, segment.n, {&segment, 1}, pool, sum.data()); !s.ok()) return s;
  }
  end_recurrent(n_past, n, kv);
  return {};
}

Status Model::forward_chunk(const int32_t* tokens, int n, std::span<const Segment> segments, ThreadPool& pool,
                            float* hidden_sum) {
  const ModelConfig& c = config_;
  const int d = c.n_embd;
  x_.resize(static_cast<size_t>(n) * d);
  xb_.resize(static_cast<size_t>(n) * d);

  // Token embeddings.
  const Matrix& embd = weights_.token_embd;
  for (int t = 0; t < n; ++t) dequantize_row(embd.type, embd.row(tokens[t]), &x_[t * d], d);
  if (c.scale_embeddings) {
    const float scale = std::sqrt(static_cast<float>(d));
    for (float& v : x_) v *= scale;
  }
  if (c.is_gemma4()) gemma4_per_layer_inputs(tokens, n, pool);

  if (c.is_deepseek4())
    deepseek4_blocks(tokens, n, segments, pool);
  else if (Status s = transformer_layers(n, segments, pool); !s.ok())
    return s;

  // The final hidden states norm(x): of every token where a
  // multi-token-prediction drafter reads them or the embeddings sum them,
  // else of the tokens whose logits are asked for.
  for (const Segment& s : segments) {
    const SequenceInput* seq = s.seq;
    const bool every_row = hidden_sum || (seq && (seq->hidden_rows || (seq->logits && seq->all_logits)));
    const bool last_row = seq && seq->logits && s.first + s.n == static_cast<int>(seq->tokens.size());
    for (int t = every_row ? s.row : last_row ? s.row + s.n - 1 : s.row + s.n; t < s.row + s.n; ++t)
      rms_norm(&xb_[t * d], &x_[t * d], weights_.output_norm.data(), d, c.rms_eps);
    if (seq && seq->hidden_rows) {
      const std::vector<float>& rows = c.is_deepseek4() ? copies_ : xb_;
      const size_t width = c.nextn_hidden_width();
      std::copy_n(&rows[s.row * width], s.n * width, &seq->hidden_rows[s.n_past * width]);
    }
  }
  if (hidden_sum) {
    for (int t = 0; t < n; ++t) add(hidden_sum, &xb_[t * d], d);
    return {};
  }
  return output_logits(segments, pool);
}

Status Model::transformer_layers(int n, std::span<const Segment> segments, ThreadPool& pool) {
  const ModelConfig& c = config_;
  std::vector<DeviceLayers::Segment> on_device;
  for (int layer = 0; layer < c.n_layer;) {
    if (!device_ || !device_->runs(layer)) {
      transformer_block(weights_.layers[layer], c.is_moe_layer(layer), c.kv_layer(layer), n, segments, pool,
                        c.is_recurrent(layer) ? layer - c.kv_layer(layer) : -1);
      if (c.is_gemma4()) gemma4_layer_end(weights_.layers[layer], layer, n, pool);
      ++layer;
      continue;
    }
    int end = layer;
    while (end < c.n_layer && device_->runs(end)) ++end;
    if (on_device.empty())
      for (const Segment& s : segments) on_device.push_back({s.kv, s.n_past, s.row, s.n});
    if (Status s = device_->run(x_.data(), n, on_device, layer, end); !s.ok()) return s;
    layer = end;
  }
  return {};
}

Result<Model::Offload> Model::offload(std::unique_ptr<gpu::Device> device, int gpu_layers, uint64_t memory_budget,
                                      int n_ctx) {
  const ModelConfig& c = config_;
  const gpu::DeviceInfo info = device->info();
  const uint64_t budget = memory_budget > 0 ? memory_budget : info.memory_bytes;
  // The last `want` layers, those the device can run; the rest stay here.
  const int want = gpu_layers < 0 ? c.n_layer : std::min(gpu_layers, c.n_layer);
  Offload placed;
  std::vector<bool> on_device(c.n_layer, false);
  std::map<std::string, std::vector<int>> left_out;  // reason -> layers
  // Keys and values, or the key rows alone where they hold the values (MLA).
  const uint64_t kv_per_layer =
      (c.values_in_keys() ? 1ull : 2ull) * c.n_head_kv * n_ctx * c.head_dim_k * sizeof(uint16_t);
  uint64_t bytes = 0;
  for (int layer = c.n_layer - 1; layer >= c.n_layer - want; --layer) {
    const LayerWeights& l = weights_.layers[layer];
    if (std::string why = c.is_deepseek4() ? "the deepseek4 block is not written for the GPU yet"
                                           : DeviceLayers::unsupported(c, l, layer, info);
        !why.empty()) {
      left_out[why].push_back(layer);
      continue;
    }
    uint64_t layer_bytes = kv_per_layer;
    for (const Matrix* m : l.matrices()) layer_bytes += matrix_bytes(*m);
    if (bytes + layer_bytes > budget) {
      if (gpu_layers >= 0)
        return Status::error("-ngl " + std::to_string(gpu_layers) + ": the layers from " + std::to_string(layer) +
                             " on need " + std::to_string((bytes + layer_bytes) >> 20) + " MiB with a " +
                             std::to_string(n_ctx) + "-position cache, and " + info.name + " has " +
                             std::to_string(budget >> 20) + " MiB (lower -ngl or -c)");
      break;
    }
    bytes += layer_bytes;
    on_device[layer] = true;
    ++placed.layers;
  }
  for (const auto& [why, layers] : left_out)
    placed.warnings.push_back(std::to_string(layers.size()) + " layer(s) stay on the CPU (" + why + ")");
  if (placed.layers == 0) return placed;
  // The output matrix goes too where every layer did and -ngl asks for
  // more than the layers (llama.cpp's rule), or by default where it fits.
  bool output = placed.layers == c.n_layer && (gpu_layers < 0 || gpu_layers > c.n_layer);
  if (output) {
    std::string why = DeviceLayers::unreadable(weights_.output, info);
    if (why.empty() && bytes + matrix_bytes(weights_.output) > budget) why = "no room";
    if (!why.empty()) {
      placed.warnings.push_back("the output matrix stays on the CPU (" + why + ")");
      output = false;
    }
  }
  auto layers = DeviceLayers::create(std::move(device), c, weights_.layers, std::move(on_device), rope_, attn_scale_,
                                     output ? &weights_.output : nullptr);
  if (!layers.ok()) return layers.status();
  device_ = std::move(*layers);
  placed.output = output;
  placed.bytes = device_->device().bytes_in_use();
  return placed;
}

Status Model::sync_kv_to_host(KvCache& kv) { return device_ ? device_->sync_to_host(kv) : Status(); }

// logits = W_out * norm(x) for the rows whose logits their sequence asks
// for, gathered so that the output matrix is read once for the chunk.
Status Model::output_logits(std::span<const Segment> segments, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd;
  const size_t n_vocab = c.n_vocab;
  // The chunk rows asked for, and where each one's logits go.
  std::vector<std::pair<int, float*>> rows;
  for (const Segment& s : segments) {
    const SequenceInput* seq = s.seq;
    if (!seq || !seq->logits) continue;
    if (seq->all_logits)
      for (int i = 0; i < s.n; ++i) rows.push_back({s.row + i, seq->logits->data() + (s.first + i) * n_vocab});
    else if (s.first + s.n == static_cast<int>(seq->tokens.size()))
      rows.push_back({s.row + s.n - 1, seq->logits->data()});
  }
  if (rows.empty()) return {};
  const int m = static_cast<int>(rows.size());
  // One run of rows (a single sequence's) goes straight to its logits.
  bool contiguous = true;
  for (int i = 1; i < m; ++i)
    contiguous = contiguous && rows[i].first == rows[0].first + i && rows[i].second == rows[0].second + i * n_vocab;
  const float* in = &xb_[rows[0].first * d];
  float* out = rows[0].second;
  if (!contiguous) {
    output_in_.resize(static_cast<size_t>(m) * d);
    output_rows_.resize(m * n_vocab);
    for (int i = 0; i < m; ++i) std::copy_n(&xb_[rows[i].first * d], d, &output_in_[i * d]);
    in = output_in_.data();
    out = output_rows_.data();
  }
  if (device_ && device_->has_output()) {
    if (Status s = device_->output(in, m, out); !s.ok()) return s;
  } else {
    matmul_.run(pool, weights_.output, in, m, d, out, c.n_vocab);
  }
  if (!contiguous)
    for (int i = 0; i < m; ++i) std::copy_n(&output_rows_[i * n_vocab], n_vocab, rows[i].second);
  // Soft-capping: cap * tanh(logit / cap).
  if (c.logit_softcap > 0) {
    const float cap = c.logit_softcap;
    for (const auto& [row, logits] : rows)
      for (float* v = logits; v != logits + n_vocab; ++v) *v = std::tanh(*v * (1.0f / cap)) * cap;
  }
  return {};
}

// One transformer block over the chunk's rows x_: x += Wo attention(norm(x)),
// then x += ffn(norm(x)), the FFN of routed experts where `moe`; with
// gemma3's post norms each branch's output is normed before it is added.
// The block keeps its keys and values in the cache's layer kv_layer.
void Model::transformer_block(const LayerWeights& l, bool moe, int kv_layer, int n,
                              std::span<const Segment> segments, ThreadPool& pool, int recurrent) {
  const ModelConfig& c = config_;
  const int d = c.n_embd;
  const int attn_width = recurrent >= 0 ? c.delta_net.value_dim()
                                        : c.n_head * (c.is_mla() ? c.mla.head_dim_v : c.value_width(kv_layer));
  attn_out_.resize(static_cast<size_t>(n) * attn_width);

  for (int t = 0; t < n; ++t) rms_norm(&xb_[t * d], &x_[t * d], l.attn_norm.data(), d, c.rms_eps);
  if (recurrent >= 0)
    gated_delta_net(l, recurrent, n, segments, pool);
  else if (c.is_mla())
    latent_attention(l, kv_layer, n, segments, pool);
  else
    grouped_query_attention(l, kv_layer, n, segments, pool);
  matmul_.run(pool, recurrent >= 0 ? l.ssm_out : l.wo, attn_out_.data(), n, attn_width, xb_.data(), d);
  if (!l.bo.empty())
    for (int t = 0; t < n; ++t) add(&xb_[t * d], l.bo.data(), d);
  if (c.has_post_norms)
    for (int t = 0; t < n; ++t) rms_norm(&xb_[t * d], &xb_[t * d], l.attn_post_norm.data(), d, c.rms_eps);
  add(x_.data(), xb_.data(), n * d);

  // The feed-forward result lands in xb_.
  for (int t = 0; t < n; ++t) rms_norm(&xb_[t * d], &x_[t * d], l.ffn_norm.data(), d, c.rms_eps);
  if (moe && c.is_gemma4())
    gemma4_ffn_with_experts(l, n, pool);
  else if (moe)
    feed_forward_moe(l, n, pool);
  else
    gated_ffn(l.w_gate, l.w_up, l.w_down, xb_.data(), n, xb_.data(), pool);
  if (c.has_post_norms)
    for (int t = 0; t < n; ++t) rms_norm(&xb_[t * d], &xb_[t * d], l.ffn_post_norm.data(), d, c.rms_eps);
  add(x_.data(), xb_.data(), n * d);
}

// out = W_down (act(W_gate x) * W_up x), for n rows of x (out may be x):
// act is silu (SwiGLU), gelu for gemma3 (GeGLU), or gpt-oss's clamped
// SwiGLU; each product plus its bias where `biases` has one.
void Model::gated_ffn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x, int n, float* out,
                      ThreadPool& pool, FfnBiases biases) {
  const int d = config_.n_embd, f = static_cast<int>(gate.rows);
  ffn_gate_.resize(static_cast<size_t>(n) * f);
  ffn_up_.resize(static_cast<size_t>(n) * f);
  auto add_bias = [n](float* rows, const float* bias, int width) {
    if (bias)
      for (int t = 0; t < n; ++t) add(rows + static_cast<size_t>(t) * width, bias, width);
  };
  matmul_.run(pool, gate, x, n, d, ffn_gate_.data(), f);
  add_bias(ffn_gate_.data(), biases.gate, f);
  matmul_.run(pool, up, x, n, d, ffn_up_.data(), f);
  add_bias(ffn_up_.data(), biases.up, f);
  if (config_.gelu_ffn) {
    geglu(ffn_gate_.data(), ffn_up_.data(), n * f);
  } else if (config_.clamped_swiglu) {
    constexpr float kAlpha = 1.702f, kLimit = 7.0f;  // gpt-oss's, fixed by the model (not in the file)
    swiglu_clamped(ffn_gate_.data(), ffn_up_.data(), n * f, kAlpha, kLimit);
  } else {
    swiglu(ffn_gate_.data(), ffn_up_.data(), n * f);
  }
  matmul_.run(pool, down, ffn_gate_.data(), n, f, out, d);
  add_bias(out, biases.down, d);
}

void Model::route(const LayerWeights& l, int n, ThreadPool& pool) {
  std::vector<float> logits(static_cast<size_t>(n) * config_.n_expert);
  matmul_.run(pool, l.router, xb_.data(), n, config_.n_embd, logits.data(), config_.n_expert);
  choose_experts(config_, l, logits.data(), n, routed_);
}

// moe_out_ = the routed_ experts' weighted outputs for n rows of `in`.
// Each expert runs once over all the tokens routed to it, each token with
// the bits it would have in any other grouping (model.h).
void Model::routed_experts(const LayerWeights& l, const float* in, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd;
  moe_out_.assign(static_cast<size_t>(n) * d, 0.0f);
  for (int e = 0; e < c.n_expert; ++e) {
    const auto& batch = routed_[e];
    if (batch.empty()) continue;
    const int m = static_cast<int>(batch.size());
    moe_in_.resize(static_cast<size_t>(m) * d);
    for (int i = 0; i < m; ++i) std::copy_n(&in[batch[i].first * d], d, &moe_in_[i * d]);
    FfnBiases biases;
    if (!l.gate_exps_bias.empty()) {
      const size_t f = c.n_ff_expert;
      biases = {&l.gate_exps_bias[e * f], &l.up_exps_bias[e * f], &l.down_exps_bias[static_cast<size_t>(e) * d]};
    }
    gated_ffn(l.gate_exps.slice(e), l.up_exps.slice(e), l.down_exps.slice(e), moe_in_.data(), m, moe_in_.data(),
              pool, biases);
    for (int i = 0; i < m; ++i) axpy(&moe_out_[batch[i].first * d], batch[i].second, &moe_in_[i * d], d);
  }
}

void Model::feed_forward_moe(const LayerWeights& l, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd;
  route(l, n, pool);
  routed_experts(l, xb_.data(), n, pool);
  // Shared experts: every token passes them, unweighted (DeepSeek) or
  // weighted by sigmoid(gate . x) (qwen35moe).
  if (!l.gate_shexp.empty()) {
    std::vector<float> weight(n, 1.0f);
    if (!l.shexp_gate.empty())
      for (int t = 0; t < n; ++t) {
        float logit = 0.0f;
        for (int i = 0; i < d; ++i) logit += l.shexp_gate[i] * xb_[t * d + i];
        weight[t] = 1.0f / (1.0f + std::exp(-logit));
      }
    gated_ffn(l.gate_shexp, l.up_shexp, l.down_shexp, xb_.data(), n, xb_.data(), pool);
    for (int t = 0; t < n; ++t) axpy(&moe_out_[t * d], weight[t], &xb_[t * d], d);
  }
  std::copy(moe_out_.begin(), moe_out_.end(), xb_.begin());
}

}  // namespace revis
