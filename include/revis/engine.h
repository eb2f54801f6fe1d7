// The revis engine: load a GGUF model once, then run sessions on it.
//
//   auto engine = revis::Engine::load({.model_path = "model.gguf"});
//   auto session = (*engine)->new_session();
//   session->eval(tokens);                 // prefill; logits of the last token
//   int32_t next = sampler.sample(session->logits());
//   session->eval({&next, 1});             // one decoding step
//
// An Engine is immutable after load and owns the weights (mapped or read
// into memory of its own: WeightMemory), the vocabulary and the thread pool;
// front ends reach the vocabulary through its methods (tokenize,
// token_bytes, ...). A Session owns one KV cache and the token history.
// Sessions share the engine's thread pool, so one forward pass runs at a
// time (revis runs one inference per machine); several sessions share that
// pass through Engine::eval_batch. Calls on one Session must come from one
// thread at a time. An Engine's const methods may be called from any
// thread. Errors are returned as Status values, never thrown.
//
// Batch invariance: a token's logits and KV rows are the same bits however
// it is evaluated: alone or in a batch beside other sessions, in a prompt
// of any length or chunking, or decoded one token at a time. So a session
// may resume from any prefix of an earlier one (revis/session_pool.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "revis/status.h"
#include "revis/text_span.h"

namespace revis {

class Tokenizer;
class Session;
class Engine;
class Drafter;

// Rows of the KV cache in memory: `positions` positions of
// `bytes_per_position` bytes each, contiguous from `data` (Session::kv_runs).
// A run whose rows each cover several positions (deepseek4's compressed
// keys: positions_per_row of them) spreads a row's bytes over them; the
// bytes of positions after its last whole row belong to a row a later
// position completes, so a checkpoint stores zeros for them.
struct KvRun {
  uint8_t* data = nullptr;
  size_t bytes_per_position = 0;
  size_t positions = 0;
  size_t positions_per_row = 1;
};

// How an engine holds the model's weights.
//   kMap:  maps the file (read as used; shared with the page cache; a model
//          larger than RAM still runs, from disk).
//   kCopy: reads the file into memory of its own at load, in 2 MiB huge
//          pages on Linux: decoding and prefill run faster than through a
//          mapping's 4 KiB pages (docs/performance.md). The matrices that
//          the kernels have a stripe form for are then rewritten into it
//          (src/model/striped_weights.h), which decodes faster still and
//          makes a token's logits the same bits alone or in a batch.
//   kAuto: kCopy on Linux where the file takes at most 60 % of the memory
//          available at load (MemAvailable), so that the KV cache and the
//          rest of the system keep room; kMap otherwise.
enum class WeightMemory { kAuto, kMap, kCopy };

struct EngineOptions {
  std::string model_path;
  WeightMemory weights = WeightMemory::kAuto;
  int n_ctx = 0;      // context length in tokens; 0 = min(model's training context, 4096)
  int n_threads = 0;  // 0 = number of physical cores
  // Lock the weights in RAM so that the kernel cannot evict them under memory
  // pressure (which turns decoding into disk reads). Failing to lock is not an
  // error: the engine still runs and ModelInfo::mlock_failure says why.
  bool mlock = false;
  // Where the layers run: "cpu" (or empty), or "vulkan" / "vulkan:N" for
  // the N-th GPU Vulkan sees (`revis devices`). With a GPU, gpu_layers is
  // how many of the last layers it runs (llama.cpp's -ngl; 99 for all),
  // -1 as many as fit in its memory (or in device_memory bytes, when set);
  // layers it cannot run stay on the CPU (ModelInfo::device_warnings).
  std::string device = "cpu";
  int gpu_layers = -1;
  uint64_t device_memory = 0;
  // Run on this engine's thread pool instead of starting one (n_threads is
  // then its count): a draft model beside its target, both evaluated from
  // one thread, never at once.
  const Engine* share_threads = nullptr;
};

// A special token of the vocabulary: id -1 and empty text when it has none.
struct SpecialToken {
  int32_t id = -1;
  std::string text;  // as the vocabulary spells it ("<s>", "<|im_end|>")
};

// Everything derived from the model file, computed once by Engine::load from
// the one mapping it opens: front ends read the file through this, never
// again themselves.
struct ModelInfo {
  std::string path;
  std::string architecture;  // "llama", "qwen2", "qwen3", "qwen3moe", "deepseek2", "deepseek4", "gemma3"
  std::string name;          // general.name
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_ctx = 0;             // the context sessions get
  float rope_freq_scale = 1; // linear RoPE scaling from the metadata; 1 = none
  int n_layer = 0;
  int n_embd = 0;
  int n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;  // the KV cache's shape per layer kept by position
  // Layers with K/V rows by position: n_layer but a hybrid's recurrent
  // layers and the sliding-window layers (gemma3, gemma4, gpt-oss), which
  // keep a ring of rows, a fixed size whatever the context.
  int n_kv_layer = 0;
  // The state a session keeps beside its rows by position, a fixed size
  // whatever the length, and once per checkpoint: a hybrid's (qwen35)
  // recurrent state, float32, of every recurrent layer; the sliding-window
  // layers' rings (model/kv_cache.h); deepseek4's compressor rows of the
  // groups open at a position (its tail, model/compressor_cache.h); 0 for
  // the others.
  uint64_t recurrent_state_bytes = 0;
  // A session's memory beside its rows: that state, and the copies a
  // hybrid may keep (5 x recurrent_state_bytes); deepseek4's compressor
  // ring and 6 tails (4 kept copies, 2 for checkpoints). Speculative
  // decoding on a hybrid adds draft_max + 1 copies
  // (Session::keep_recent_states).
  uint64_t session_state_bytes = 0;
  // What a speculating session keeps per draft token to take back a
  // rejected one (Session::keep_recent_states): a hybrid's recurrent
  // state; 0 for the others, whose caches go back by themselves.
  uint64_t draft_state_bytes = 0;
  // Where a checkpoint's prefix can resume without evaluating anything
  // again: multiples of this, besides the checkpoint's end. 1 for most
  // models; deepseek4: its largest compression ratio (a shorter prefix
  // resumes from the multiple below and evaluates the rest); 0 for
  // hybrids, whose checkpoints resume whole only.
  int kv_resume_interval = 1;
  bool has_mtp = false;      // a multi-token-prediction block (nextn; revis/draft.h's mtp_drafter)
  // Bytes per position the cache keeps beside the K/V heads' rows:
  // deepseek4's compressed keys and resume copies (model/compressor_cache.h),
  // 0 for the others. They are runs of Session::kv_runs() after the heads'.
  uint64_t kv_state_bytes_per_token = 0;
  uint64_t kv_bytes_per_token = 0;  // a session's whole cache per position (its K/V rows and those planes)
  int n_threads = 0;
  uint64_t file_bytes = 0;
  uint64_t bytes_per_token = 0;  // weight bytes read per generated token
  bool weights_copied = false;   // the weights were read into memory of their own (EngineOptions::weights)
  uint64_t striped_matrices = 0; // of them, matrices kept in stripes of rows (kCopy's note above)
  std::string mlock_failure;     // with EngineOptions::mlock: why locking failed; empty when locked
  std::string device = "cpu";    // "cpu", or the GPU's name ("llvmpipe (LLVM 15.0.6, 256 bits)")
  int gpu_layers = 0;            // layers the GPU runs
  bool gpu_output = false;       // and the output matrix
  uint64_t device_bytes = 0;     // GPU memory the model's layers and scratch take (caches come per session)
  uint64_t device_memory_bytes = 0;        // the GPU's memory (or EngineOptions::device_memory)
  uint64_t device_kv_bytes_per_token = 0;  // a session's cache of the GPU's layers, per position
  std::vector<std::string> device_warnings;  // layers left on the CPU, and why
  // The file's identity (src/engine/model_digest.h): "sha256:<hex>" (the
  // plain SHA-256 of files up to 32 MiB) or "sha256-sampled:<hex>". The node
  // reports it with every result; fingerprint, its first 64 bits, is what
  // KV checkpoints record.
  std::string digest;
  uint64_t fingerprint = 0;
  std::string chat_template;     // tokenizer.chat_template (Jinja source); empty when the file has none
  SpecialToken bos, eos, eot;    // begin and end of sequence, end of turn
  std::vector<int32_t> eog_tokens;  // every id is_end_of_generation() accepts, ascending
  int64_t file_type = -1;        // general.file_type (llama.cpp's LLAMA_FTYPE); -1 when absent
  std::map<std::string, uint64_t> tensor_bytes_by_type;  // weight bytes per tensor type name ("Q4_K", "F32")
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> load(const EngineOptions& options);
  ~Engine();

  const ModelInfo& info() const;

  // Text -> ids. add_bos as the model's metadata asks: add_bos_default().
  // parse_special: control-token texts ("<|im_start|>") become those
  // tokens; otherwise they are tokenized as plain text.
  std::vector<int32_t> tokenize(std::string_view text, bool add_bos, bool parse_special) const;
  // tokenize() with parse_special, except that no control token is matched
  // overlapping a `literal` span: a rendered chat prompt whose spans hold
  // client text (chat/chat_template.h). Without control-token texts in the
  // spans the ids equal tokenize(text, add_bos, true).
  std::vector<int32_t> tokenize_template(std::string_view text, bool add_bos,
                                         std::span<const TextSpan> literal) const;
  bool add_bos_default() const;
  // The bytes a token stands for (may be part of a UTF-8 character); "" for
  // ids outside the vocabulary. Control tokens give their text only with
  // render_control, "" otherwise.
  std::string token_bytes(int32_t id, bool render_control = false) const;
  // The token's text as the vocabulary spells it ("<|im_end|>", "▁the");
  // "" for ids outside it.
  std::string token_text(int32_t id) const;
  // The id of the token the vocabulary spells exactly `text`.
  std::optional<int32_t> find_token(std::string_view text) const;
  // Control (or unknown) tokens: markup such as "<|im_start|>", not text.
  bool is_control(int32_t id) const;
  bool is_end_of_generation(int32_t id) const;

  // A new session with an empty KV cache of info().n_ctx tokens.
  std::unique_ptr<Session> new_session();

  // One session's share of eval_batch: as session->eval(tokens, all_logits).
  struct BatchItem {
    Session* session = nullptr;
    std::span<const int32_t> tokens;
    bool all_logits = false;
  };
  // Runs every item as its Session::eval would, in one pass over the
  // weights: each matrix is read once per 256 tokens of the whole batch
  // instead of once per session, which is what makes several sequences
  // decode at nearly the speed of one where reading the weights is the
  // bottleneck. Each session ends exactly as after its own eval (batch
  // invariance, above). Fails, changing no session, when an item's eval
  // would fail or two items name one session.
  Status eval_batch(std::span<const BatchItem> items);

 private:
  friend class Session;
  friend Result<std::unique_ptr<Drafter>> mtp_drafter(const Engine& target);  // runs the model's nextn block
  // The vocabulary itself, for the engine's own files (engine/engine_impl.h).
  friend const Tokenizer& engine_tokenizer(const Engine& engine);
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Session {
 public:
  ~Session();

  // Appends tokens to the context and runs the model over them. With
  // all_logits, logits(i) holds the row after tokens[i]; otherwise only
  // logits(0), the row after the last token. Fails (changing nothing) when
  // the context would overflow or an id is outside the vocabulary.
  Status eval(std::span<const int32_t> tokens, bool all_logits = false);
  std::span<const float> logits(int row = 0) const;
  int n_logit_rows() const;
  // Appends tokens as eval() does, but instead of logits returns the mean,
  // over these tokens, of the model's final hidden state (after the output
  // norm; info().n_embd values): the pooled representation embeddings are
  // made of. Fails as eval() does; leaves no logits.
  Result<std::vector<float>> mean_hidden_state(std::span<const int32_t> tokens);

  // From now on every eval also keeps each token's final hidden state
  // (after the output norm; info().n_embd values; deepseek4: the stream's
  // hyper_connection.count copies before their output mix, that many times
  // n_embd), by position: what a multi-token-prediction drafter reads.
  // Costs n_ctx() x that many floats.
  void keep_hidden_states();
  // The kept hidden state of the token at `pos` (< n_past()); empty when
  // not kept, or when the row came from a checkpoint (adopt_kv) or from
  // mean_hidden_state rather than an eval.
  std::span<const float> hidden_state(int pos) const;

  int n_past() const { return static_cast<int>(history_.size()); }
  int n_ctx() const;
  const std::vector<int32_t>& history() const { return history_; }
  // Forgets every token from position n on; the KV rows before n stay valid.
  // Logits of an earlier eval are dropped with the tokens they followed.
  void truncate(int n);
  // Whether the cache can continue from any position before n_past():
  // false for models with recurrent layers (qwen35), whose state stands at
  // n_past() and at the positions where keep_recurrent_state() copied it,
  // and for sliding-window layers, whose rings hold the last positions
  // only. Such a session truncated to a position resumable_at() does not
  // give fails its next eval. deepseek4 can: its compressors keep their
  // state for the last CompressorCache::kRewind positions, at kept copies
  // and at resume points (ModelInfo::kv_resume_interval); truncated
  // elsewhere, the next eval first evaluates the tokens from the resume
  // point below again.
  bool can_rewind() const;
  // How many of the last positions evaluated can always be taken back
  // (truncate, then eval) with nothing evaluated again: every one for
  // caches kept by position; for a hybrid, those keep_recent_states()
  // keeps; for sliding-window layers, what their rings hold beyond the
  // window (more than a forward pass's chunk, 256); deepseek4's 16.
  int rewind_reach() const;
  // The highest position at or below min(n, n_past()) from which the next
  // eval may continue with nothing evaluated again: that position itself
  // but for hybrids, for which it is n_past(), a kept or recent state's
  // position, or 0; for sliding-window layers, for which it is 0 once
  // their rings lost the window before n; and deepseek4, for which it is
  // the resume point below unless its compressors' state is at hand there.
  int resumable_at(int n) const;
  // Hybrids: copies the recurrent state as it stands now, after n_past()
  // tokens, so that truncate() back to this position restores it and a
  // checkpoint of these tokens can hold it (deepseek4: its compressors'
  // tail). A session keeps the last 4 (ModelInfo::recurrent_state_bytes
  // each); truncating below one drops it. Does nothing for other models,
  // whose rows are kept by position.
  void keep_recurrent_state();
  // Hybrids: keeps a copy of the recurrent state after each of the last
  // `positions` tokens evaluated, written as each is evaluated
  // (ModelInfo::recurrent_state_bytes apiece), so that truncate() may go
  // back to any of them: what speculative decoding needs to take back a
  // rejected draft, bit for bit as if it had never been evaluated. Raising
  // the count forgets the copies made so far; lowering it does nothing.
  // Does nothing for other models.
  void keep_recent_states(int positions);
  // Hybrids: the recurrent state after the first n tokens (the current one
  // when n is n_past(), else a kept one); sliding-window layers: the rings,
  // while they hold the window before n; deepseek4: its compressors' tail
  // at n, kept or taken from the current state. Empty when there is none:
  // what a checkpoint of those tokens stores beside their rows.
  std::span<const float> recurrent_state_at(int n) const;

  // Checkpoints (src/kvstore) move rows between a file and the KV cache
  // with no copy in between. The cache is a list of runs: kv_runs()[r]
  // holds positions [0, n_ctx()) contiguously, bytes_per_position bytes
  // (float16 values) each. A checkpoint stores the first n positions of every
  // run, run after run; with K/V heads the runs are every key
  // [layer][kv head], then every value [layer][kv head], then any float32
  // state planes [layer][plane] (ModelInfo::kv_state_bytes_per_token).
  // kv_bytes_per_token() is the sum of the runs' widths. Rows a GPU keeps
  // are copied into the runs first; the list is empty when that fails.
  //
  // A hybrid's runs are its attention layers' keys and values; its
  // recurrent state is not kept by position, and a checkpoint of n tokens
  // stores it once, as it stood after them (recurrent_state_at(n)). So do
  // a sliding-window model's: its runs are its global layers', its rings
  // the state.
  //
  // Restoring: truncate(0), read rows into the runs (and a hybrid's state
  // into recurrent_state()), then adopt_kv(tokens) makes them the history
  // (no logits until the next eval). Saving: another
  // thread may read rows of positions below n_past() while this session
  // evaluates, since evaluation writes only later positions; nothing may
  // truncate below those positions or destroy the session meanwhile.
  size_t kv_bytes_per_token() const;
  std::vector<KvRun> kv_runs();
  // read_tokens: how many tokens the checkpoint read into the runs held
  // (its state is the one after them); 0: tokens.size().
  Status adopt_kv(std::span<const int32_t> tokens, size_t read_tokens = 0);
  // A hybrid's current recurrent state or the rings, to read a
  // checkpoint's into; deepseek4: a buffer for a checkpoint's tail, which
  // the next adopt_kv takes as the state after its tokens (without it,
  // adopt_kv continues from the resume point below them); empty for other
  // models.
  std::span<float> recurrent_state();

 private:
  friend class Engine;
  struct State;
  explicit Session(Engine& engine);
  // After the model evaluated tokens into this session's state: the history.
  void appended(std::span<const int32_t> tokens, bool all_logits);
  // keep_recent_states' copy of the state after n tokens; empty when none.
  std::span<const float> recent_state(int n) const;
  // Where the next eval of n tokens writes the state after each (null: no
  // copy), or null when this session keeps none.
  float* const* recent_destinations(int n);
  // Whether the session holds a state besides its rows (ModelInfo::recurrent_state_bytes).
  bool keeps_state() const;
  // deepseek4: evaluates again the tokens between where its compressors'
  // state stands and n_past() (after a truncate or adopt_kv that left it
  // at a resume point below), so that the next eval continues from n_past().
  Status catch_up();
  Engine& engine_;
  std::unique_ptr<State> state_;
  std::vector<int32_t> history_;
};

}  // namespace revis
