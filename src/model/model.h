// Model: a loaded transformer (llama, qwen2, qwen3, qwen3moe, deepseek2,
// deepseek4, gemma3, gemma4, gpt-oss, and the hybrids qwen35, qwen35moe and
// qwen3next) and its forward pass. forward() evaluates a batch: the tokens
// of one or more sequences, each appended to its own KvCache, in one pass
// over the weights, and returns logits for the rows asked for.
//
// Batch invariance: a token's logits and KV rows are the same bits whatever
// else is in the batch (other sequences, a prompt's chunk or a decoding
// step, how the tokens are chunked). Every matrix product computes each row
// through a kernel whose float steps do not depend on the rows beside it
// (matmul.h: a matrix in stripes, or the single-token kernel for each row,
// the weights still read once per call); attention, norms, RoPE and the
// routing work row by row. So a sequence may be resumed from any prefix.
//
// The Model itself is immutable after load, so several sessions may share
// it, but one forward call uses one ThreadPool and one scratch area:
// callers serialise them.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "gguf/gguf.h"
#include "gpu/device.h"
#include "model/cache_walk.h"
#include "model/config.h"
#include "model/device_layers.h"
#include "model/kv_cache.h"
#include "model/matmul.h"
#include "model/prefetch_tuner.h"
#include "model/rope.h"
#include "model/routing.h"
#include "model/thread_pool.h"
#include "model/weights.h"
#include "revis/status.h"

namespace revis {

// One FFN's biases (gpt-oss's experts), each null where there is none.
struct FfnBiases {
  const float* gate = nullptr;
  const float* up = nullptr;
  const float* down = nullptr;
};

class Model {
 public:
  static Result<std::unique_ptr<Model>> load(std::shared_ptr<const gguf::GgufFile> file);

  const ModelConfig& config() const { return config_; }
  const gguf::GgufFile& file() const { return *file_; }
  // Bytes of weights read to produce one token (every matrix once; for MoE
  // only the experts in use), the numerator of the bandwidth roofline.
  uint64_t bytes_per_token() const;

  // One sequence's share of a forward pass: `tokens` at positions
  // n_past.. of `kv`, and where its results go.
  struct SequenceInput {
    std::span<const int32_t> tokens;
    int n_past = 0;
    KvCache* kv = nullptr;
    bool all_logits = false;               // a row of logits per token; else only the last token's
    std::vector<float>* logits = nullptr;  // receives those rows of n_vocab; null: KV rows only
    // Non-null: every token's final hidden state (after the output norm;
    // deepseek4: the stream's copies before their output mix) is written to
    // hidden_rows[position * config().nextn_hidden_width()], what a
    // multi-token-prediction drafter reads.
    float* hidden_rows = nullptr;
    // Hybrids, non-null: one destination per token (null ones skipped) for
    // the recurrent state as it stands after that token, every recurrent
    // layer's, laid out as KvCache::recurrent_state(): what lets a session
    // go back to a position inside this pass (a rejected draft).
    float* const* recurrent_states = nullptr;
  };
  // Evaluates every sequence's tokens; the matrices are read once per chunk
  // of up to kChunk tokens of the whole batch. Each sequence must have its
  // own cache. Fails, changing nothing, when a sequence would overflow its
  // context or names a token outside the vocabulary, or (hybrids) starts
  // neither at 0 nor where its cache's recurrent state stands
  // (kv_cache.h: that state cannot be rewound; a cache without recurrent
  // layers, the nextn block's, may start anywhere), or (sliding-window
  // layers) at a position whose window the cache's rings no longer hold.
  Status forward(std::span<const SequenceInput> batch, ThreadPool& pool);
  // One sequence: tokens[0..n) at positions n_past..n_past+n-1; logits
  // receives n rows of n_vocab if all_logits, else the last token's row.
  Status forward(std::span<const int32_t> tokens, int n_past, KvCache& kv, ThreadPool& pool, bool all_logits,
                 std::vector<float>& logits);
  // As forward(), but instead of logits adds every token's final hidden
  // state (after the output norm: the input of the output projection,
  // n_embd values) to `sum`, which holds n_embd values: what embeddings pool.
  Status forward_hidden(std::span<const int32_t> tokens, int n_past, KvCache& kv, ThreadPool& pool,
                        std::span<float> sum);

  // Multi-token prediction (docs/architecture.md): whether the file has a
  // nextn block, and its forward pass. Runs tokens[0..n) at positions
  // n_past.. of `kv`, a cache of one layer (the block's own), token i
  // paired with hidden[i] (config().nextn_hidden_width() values: the
  // model's final hidden state at the position before it, or the block's
  // own output when chaining). Gives the last token's logits (the guess
  // for the token after it) and its output hidden state, both after the
  // block's head norm (deepseek4: the output copies, before any mix).
  bool has_nextn() const { return !weights_.nextn.empty(); }
  Status forward_nextn(std::span<const int32_t> tokens, std::span<const float> hidden, int n_past, KvCache& kv,
                       ThreadPool& pool, std::vector<float>& logits, std::vector<float>& out_hidden);
  // Shows the input of every matrix product of later forward calls to
  // `observer` (null: none). For offline tools (revis imatrix); like
  // forward, not to be called while a forward call runs.
  void set_matmul_observer(MatmulObserver* observer) { matmul_.set_observer(observer); }

  // Where the layers run once offload() has placed them on a GPU.
  struct Offload {
    int layers = 0;                      // how many run on the device
    bool output = false;                 // the output matrix too
    uint64_t bytes = 0;                  // device memory their weights and scratch take
    std::vector<std::string> warnings;   // layers left on the CPU and why, one line per reason
  };
  // Runs layers on `device` (model/device_layers.h): the last `gpu_layers`
  // of the model (llama.cpp's -ngl; more than n_layer means all), or with
  // -1 as many as fit beside one session's cache of n_ctx positions in
  // `memory_budget` bytes (0: the device's memory). A layer the device
  // cannot run stays on the CPU, named in the warnings. The output matrix
  // goes too when every layer did and gpu_layers is -1 or above n_layer. Fails, naming the
  // bytes needed and available, when the layers asked for do not fit.
  // Called once, at load, before keep_weights_in_stripes and any forward.
  Result<Offload> offload(std::unique_ptr<gpu::Device> device, int gpu_layers, uint64_t memory_budget, int n_ctx);
  const gpu::Device* device() const { return device_ ? &device_->device() : nullptr; }
  // Copies into kv's host rows what only the GPU holds (before reading
  // them: a checkpoint); nothing without a GPU.
  Status sync_kv_to_host(KvCache& kv);

  // Keeps every matrix that the active kernel backend has a stripe form
  // for in stripes, in memory of the model's own (striped_weights.h), and
  // gives the file's copy of them back (GgufFile::release), as it does the
  // matrices of the layers a GPU runs (offload, before this). Returns how
  // many matrices; 0 where the backend has no stripe forms. Called once,
  // at load, before any forward call.
  Result<uint64_t> keep_weights_in_stripes();
  // The striped matrices' memory (empty before or without).
  const HugePageMemory& striped_memory() const { return striped_memory_; }
  // Whether tensor t of the file was given back, read from the stripes instead.
  bool reads_in_stripes(const gguf::TensorInfo& t) const;

 private:
  // Tokens per pass through the layers in a forward call: what bounds the
  // scratch rows below and the cache's rings (cache_walk.h).
  static constexpr int kChunk = kChunkTokens;

  // Rows [row, row + n) of a chunk: tokens of one sequence at positions
  // n_past.. of kv, the first of them token `first` of `seq` (null for the
  // callers that want no logits: embeddings, the nextn block).
  struct Segment {
    KvCache* kv;
    int n_past, row, n;
    const SequenceInput* seq = nullptr;
    int first = 0;
  };

  Model() = default;
  void set_up_rope_and_scale();
  Status check_batch(std::span<const int32_t> tokens, int n_past, const KvCache& kv) const;
  // Hybrids: a sequence starting at 0 starts from a zero recurrent state;
  // deepseek4: one starting at 0 starts its compressors afresh. After the
  // pass, every cache's state stands at n_past + n (kv.wrote).
  void begin_recurrent(int n_past, KvCache& kv) const;
  void end_recurrent(int n_past, int n, KvCache& kv) const;
  // The chunk's n tokens through the model, segment by segment: each
  // segment's logits and hidden rows as its sequence asks, or with
  // hidden_sum every token's final hidden state added into it.
  Status forward_chunk(const int32_t* tokens, int n, std::span<const Segment> segments, ThreadPool& pool,
                       float* hidden_sum = nullptr);
  // The chunk's layers, each on the CPU or, for a run of them, the GPU.
  Status transformer_layers(int n, std::span<const Segment> segments, ThreadPool& pool);
  // The output projection for the chunk's rows in xb_ whose logits are asked for.
  Status output_logits(std::span<const Segment> segments, ThreadPool& pool);
  // recurrent >= 0: a hybrid's recurrent layer of that index (among the
  // recurrent ones) in place of attention.
  void transformer_block(const LayerWeights& l, bool moe, int kv_layer, int n, std::span<const Segment> segments,
                         ThreadPool& pool, int recurrent = -1);
  // A hybrid's gated delta-net over the chunk's rows xb_ (delta_net.cpp),
  // into attn_out_, each segment against its cache's state.
  void gated_delta_net(const LayerWeights& l, int recurrent, int n, std::span<const Segment> segments,
                       ThreadPool& pool);
  void grouped_query_attention(const LayerWeights& l, int layer, int n, std::span<const Segment> segments,
                               ThreadPool& pool);
  void latent_attention(const LayerWeights& l, int layer, int n, std::span<const Segment> segments,
                        ThreadPool& pool);
  void attend(int layer, int n, int n_past, KvCache& kv, ThreadPool& pool, float* queries, float* out,
              std::span<const float> sinks = {});
  void gated_ffn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x, int n, float* out,
                 ThreadPool& pool, FfnBiases biases = {});
  void feed_forward_moe(const LayerWeights& l, int n, ThreadPool& pool);
  // moe_out_: the weighted outputs of the experts routed_ names for n rows of `in`.
  void routed_experts(const LayerWeights& l, const float* in, int n, ThreadPool& pool);
  // Chooses each token's experts and their weights into routed_ (routing.h).
  void route(const LayerWeights& l, int n, ThreadPool& pool);

  // gemma4 (gemma4.cpp): the chunk's per-layer inputs, from its tokens and
  // their scaled embeddings in x_, into per_layer_in_; and what follows
  // block `layer`: its per-layer embedding added to x_, then x_ times its
  // output factor.
  void gemma4_per_layer_inputs(const int32_t* tokens, int n, ThreadPool& pool);
  void gemma4_layer_end(const LayerWeights& l, int layer, int n, ThreadPool& pool);
  // gemma4's FFN where it has experts: the dense branch over xb_ (the
  // FFN norm's rows) plus the experts' branch over x_, into xb_.
  void gemma4_ffn_with_experts(const LayerWeights& l, int n, ThreadPool& pool);

  // deepseek4 (deepseek4.cpp): the blocks over the hyper-connected stream,
  // leaving in x_ the mix of its copies that the output norm reads.
  // The chunk's rows may come from several sequences (segments): every
  // matrix takes them all at once, and each row meets its own cache at its
  // own position (places_).
  void deepseek4_blocks(const int32_t* tokens, int n, std::span<const Segment> segments, ThreadPool& pool);
  void place_rows(std::span<const Segment> segments);
  void deepseek4_block(const Deepseek4Layer& l, int block, int kv_layer, const int32_t* tokens, int n,
                       ThreadPool& pool);
  void read_copies(const HyperMix& m, bool head, int n, ThreadPool& pool);
  void write_copies(int n);
  void deepseek4_attention(const Deepseek4Layer& l, int ratio, int layer, int n, ThreadPool& pool);
  void compress(const Compressor& comp, int layer, CompressorCache::Which which, int n, ThreadPool& pool);
  void select_compressed(const Deepseek4Layer& l, int ratio, int layer, int n, ThreadPool& pool);
  void sparse_attention(const Deepseek4Layer& l, int ratio, int layer, int n, ThreadPool& pool);
  void deepseek4_moe(const Deepseek4Layer& l, int block, const int32_t* tokens, int n, ThreadPool& pool);
  // deepseek4's multi-token-prediction block over one chunk (nextn.cpp's
  // forward_nextn), leaving its output copies in copies_.
  void deepseek4_nextn_chunk(const int32_t* tokens, const float* hidden, int n, int n_past, KvCache& kv,
                             ThreadPool& pool);
  void clamped_swiglu_ffn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x, int n, float* out,
                          float limit, ThreadPool& pool);

  std::shared_ptr<const gguf::GgufFile> file_;
  ModelConfig config_;
  ModelWeights weights_;
  HugePageMemory striped_memory_;
  std::vector<const uint8_t*> released_;  // the data of the tensors given back, sorted
  Rope rope_;
  Rope compressed_rope_;  // deepseek4's compressing blocks and its compressed keys
  Rope local_rope_;       // the sliding-window layers of gemma3 and gpt-oss
  float attn_scale_ = 1.0f;        // the attention scores' factor, 1/sqrt(key width) unscaled
  float query_scale_ = 1.0f;       // gemma3: the queries' factor, after RoPE (attn_scale_ is then 1)

  // Scratch, one row per token of the current chunk.
  std::vector<float> x_, xb_, q_, k_, v_, attn_out_, ffn_gate_, ffn_up_, moe_in_, moe_out_;
  std::vector<float> q_a_, q_latent_, latent_out_;              // latent attention
  ExpertRows routed_;                                           // expert -> (token, weight)
  std::vector<float> nextn_in_;                                 // multi-token prediction's [e ; h] rows
  std::vector<float> attn_gate_;                                // qwen35: attention's output gates
  std::vector<float> per_layer_in_, per_layer_act_;             // gemma4's per-layer inputs, and one layer's gate
  std::vector<float> mix_, delta_beta_, delta_decay_;           // qwen35's recurrent layers
  // deepseek4: the stream's copies, their normalised rows and mix logits,
  // each token's mix weights, compressor rows, indexer queries and weights,
  // the compressed keys each token reads, grouped output.
  std::vector<float> copies_, copies_normed_, mix_logits_, mix_pre_, mix_post_, mix_comb_;
  std::vector<float> comp_kv_, comp_score_, index_q_, index_w_, index_scores_, out_a_;
  std::vector<std::vector<int>> picked_;
  struct RowPlace {
    KvCache* kv;
    int pos;
  };
  std::vector<RowPlace> places_;  // each row's cache and position
  std::vector<int32_t> chunk_tokens_;                           // a chunk's tokens, sequence after sequence
  std::vector<float> output_in_, output_rows_;                  // the rows whose logits are asked for
  std::unique_ptr<DeviceLayers> device_;  // the layers on a GPU, if any (offload)
  MatMul matmul_;                 // single-token kernels for every row (batch invariance, above)
  PrefetchTuner prefetch_tuner_;  // times the single-token steps
};

}  // namespace revis
