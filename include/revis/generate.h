// generate(): the one generation loop every front end calls (the CLI's run,
// chat and kv commands, the node's executor).
//
//   GenerateOptions options;
//   options.max_tokens = 64;
//   auto r = revis::generate(*engine, *session, prompt, options,
//                            [](std::string_view text) { fputs(...); });
//
// It prefills the prompt in chunks, then samples, streams text and decodes
// one token at a time until a token budget ("length"), an end-of-generation
// token ("eog"), a stop string ("stop"), a full context ("context") or
// cancellation ("cancelled"). The engine owns the sampling; a caller steers
// it only through GenerateOptions: the sampler's parameters (with the logit
// bias), stop strings, a cancel flag, a progress callback and a constraint
// on the tokens (a grammar, a JSON schema).
//
// With a drafter (speculative decoding), each decoding step evaluates the
// sampled token together with up to draft_max tokens the drafter guesses
// will follow (logits at every position, each bit-identical to one-token
// decoding's: engine.h's batch invariance), and takes the guesses that the
// sampler confirms in order, so one forward pass may yield several
// tokens. Greedy output is the same token for token as without a drafter;
// sampled output keeps the same distribution (Sampler::sample_draft's
// rejection sampling) though not the same draws. The constraint, the logit
// bias, the penalties and logprobs apply to every position as without it.
// A model with recurrent layers takes rejected guesses back from copies of
// its state after each token of the step (Session::keep_recent_states:
// draft_max + 1 of them per session).
//
// Thread-safety: runs on the calling thread, and the callbacks, the
// constraint and the drafter are called on it; `cancel` may be set from
// any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "revis/engine.h"
#include "revis/sampling.h"
#include "revis/status.h"

namespace revis {

// A constraint on which tokens may come next (a grammar, a JSON schema).
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of tokens that may not come next to -infinity.
  virtual void mask(std::span<float> logits) = 0;
  // Advances past the chosen token; an error if the token was not allowed.
  virtual Status accept(int32_t token) = 0;
  // True when the output so far is complete, so end-of-generation may come next.
  virtual bool can_end() const = 0;
};

// What a prefix cache restored before generate() (revis/session_pool.h,
// kvstore/prefix_cache.h): the session holds prompt[0, cached_tokens).
// When that is the whole prompt, next_logits are the logits after its last
// token, which the session itself no longer has.
struct PromptCache {
  int cached_tokens = 0;
  std::span<const float> next_logits;
  double restore_ms = 0;  // time spent restoring, counted in prefill and TTFT
};

// The log-probability of one token. Log-probabilities are the log-softmax
// over the whole vocabulary of the logits the sampler started from: after
// the logit bias, the penalties and the constraint's mask, before the
// temperature and the truncating filters (top-k, top-p, min-p). So, as in
// OpenAI's API, a token's logprob does not depend on the temperature, and
// greedy decoding reports real values. Masked tokens have -infinity.
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
};

struct TokenLogprobs {
  TokenLogprob chosen;            // the token that was sampled
  std::vector<TokenLogprob> top;  // the top_logprobs most likely, best first (ties: lower id first)
};

// Proposes the tokens likely to come next (speculative decoding's drafts):
// prompt lookup, a draft model (revis/draft.h).
class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `max` (>= 1) tokens guessed to follow `context` (the prompt and
  // the output so far; each call's context extends an earlier one's or
  // starts a new generation); fewer or none when it has no guess.
  virtual Result<std::vector<int32_t>> draft(std::span<const int32_t> context, int max) = 0;
  // Called by generate() before it evaluates anything, with the session
  // the target evaluates the context in: a drafter that reads the target's
  // own state (mtp_drafter: its hidden states) keeps it. Others ignore it.
  virtual void attach(Session& target) { (void)target; }
  // A drafter of the same kind with state of its own (a draft model's
  // session, the MTP block's cache), sharing this one's weights, for one
  // more sequence drafting at the same time: each generation needs its
  // own. Null where the kind has no such copy.
  virtual std::unique_ptr<Drafter> another() const { return nullptr; }
  // Bytes of memory this drafter's own state takes at most (a draft
  // model's session at the full context, the MTP block's cache), which each
  // copy from another() takes again: a node counts it into every slot.
  virtual uint64_t state_bytes() const { return 0; }
};

struct GenerateOptions {
  int max_tokens = 128;               // generated tokens at most; 0 = prefill only
  SamplingParams sampling;
  std::vector<std::string> stop;      // stop strings (not included in the text)
  bool ignore_eog = false;            // keep going past end-of-generation tokens (not with a constraint)
  bool record_logits = false;         // keep prompt and per-step logits (for --logits-out)
  bool logprobs = false;              // fill GenerateResult::logprobs
  int top_logprobs = 0;               // with logprobs: alternatives per token, 0..20
  // With logprobs: each sampled token's, as it is sampled (before its text
  // reaches on_text), for callers that stream them.
  std::function<void(const TokenLogprobs&)> on_logprobs;
  // Control tokens whose text the output keeps (ascending ids): a chat
  // format's tool-call markers and thinking tags, which the caller reads
  // back. Others give no text. Only the model samples them: prompt text is
  // tokenized by the caller, with client text as plain text.
  std::vector<int32_t> shown_tokens;

  // Polled between prefill chunks and before every decoding step: a client
  // that goes away frees the machine within one chunk or token.
  const std::atomic<bool>* cancel = nullptr;
  // After every prefill chunk (n_prompt_done grows, n_generated = 0) and
  // every sampled token (n_prompt_done = the prompt's length).
  std::function<void(int n_prompt_done, int n_generated)> on_progress;
  // Tokens per eval during prefill: the cancellation granularity (any size
  // gives the same logits), and for models with recurrent layers where the
  // session keeps a copy of its state (Session::keep_recurrent_state: at
  // each chunk's end and the prompt's), from which a later prompt may resume.
  int prefill_chunk = 256;
  // With a constraint, every step masks the logits with it before sampling
  // and accepts the sampled token; end-of-generation tokens may come only
  // when can_end(), and then end the generation ("eog"). A complete output
  // that allows no further token ends with "stop"; an incomplete one that
  // allows none is an error. The constraint must outlive the call.
  TokenConstraint* constraint = nullptr;
  // Speculative decoding: drafts of at most draft_max tokens per step from
  // `drafter` (null or draft_max 0: none). The drafter must outlive the call.
  Drafter* drafter = nullptr;
  int draft_max = 0;
};

struct GenerateResult {
  int n_prompt = 0;
  int cached_tokens = 0;              // prompt tokens restored instead of evaluated
  std::vector<int32_t> generated;     // every sampled token, including a final end-of-generation one
  std::vector<TokenLogprobs> logprobs;  // with options.logprobs: one per generated token
  std::string text;                   // what was streamed
  std::string stop_reason;            // "length", "eog", "stop", "context", "cancelled"
  std::string stop_sequence;          // with "stop": the stop string that ended it (empty: the constraint did)
  // Speculative decoding: tokens the drafter proposed and the target
  // evaluated, and how many of them the sampler kept.
  int draft_tokens = 0, accepted_tokens = 0;
  // Timings include PromptCache::restore_ms. generate_ms runs from the first
  // sampled token to the last, so it spans generated.size() - 1 decoding steps.
  double prefill_ms = 0, generate_ms = 0, ttft_ms = 0;
  std::chrono::steady_clock::time_point first_token{};  // when the first token was sampled (epoch if none)
  // The logits after the last prompt token (what a checkpoint stores);
  // empty when cancelled during the prefill.
  std::vector<float> next_logits;
  // With record_logits: one row per prompt position from
  // first_logits_position on (0 after a cold prefill; later after a resume,
  // since restored positions have no logits), and one per generated token
  // but the last (the logits that chose the next token).
  int first_logits_position = 0;
  std::vector<float> prompt_logits, generated_logits;
};

// Receives whole UTF-8 characters as they are produced, stop strings removed.
using TextSink = std::function<void(std::string_view)>;

// Runs the prompt through `session` and generates. Without a cache the
// session is emptied first; with one, it must hold exactly prompt[0,
// cached.cached_tokens). Afterwards the session holds the prompt and the
// output (all of it but the last sampled token, which was never evaluated).
Result<GenerateResult> generate(Engine& engine, Session& session, std::span<const int32_t> prompt,
                                const GenerateOptions& options, const TextSink& on_text,
                                const PromptCache& cached = {});

class Generation;

// Continuous batching: generations that share each forward pass (one pass
// at a time per machine, carrying every generation that fits: the weights
// are read once for all of them). Each keeps its own session, options
// (sampler and seed, constraint, stop strings, drafter, logprobs) and
// callbacks, and produces exactly what generate() produces alone (engine.h's
// batch invariance). A generation joins at the next step and leaves when it
// ends. Each step evaluates every decoding generation's next token, then
// fills what is left of the step's token budget with prompt chunks, oldest
// prompt first: a long prompt is prefilled a chunk per step, interleaved
// with the others' tokens, instead of stalling them.
//
// Thread-safety: none; add() and step() from one thread (callbacks run on
// it). A generation's `cancel` may be set from any thread.
class GenerationBatch {
 public:
  // step_tokens: the per-step token budget (>= 1).
  explicit GenerationBatch(Engine& engine, int step_tokens = 256);
  ~GenerationBatch();

  using Done = std::function<void(Result<GenerateResult>)>;
  // Adds a generation, as generate(engine, session, prompt, options,
  // on_text, cached) would run it; on_done receives its outcome. The
  // session, the prompt and the options (with what they point to) must
  // outlive it. Two generations may not share a session.
  void add(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options, TextSink on_text,
           Done on_done, const PromptCache& cached = {});
  // One forward pass over the generations that have work; those that end
  // report through on_done. Returns how many are still running.
  int step();
  int size() const { return static_cast<int>(running_.size()); }

 private:
  struct Running;
  void report_finished();

  Engine& engine_;
  int step_tokens_;
  std::vector<std::unique_ptr<Running>> running_;  // in the order they joined
};

}  // namespace revis
