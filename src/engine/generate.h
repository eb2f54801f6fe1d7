// generate(): the loop every front end shares (CLI, later the node):
// prefill the prompt, then sample, stream text and decode one token at a time
// until a token budget, an end-of-generation token or a stop string.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "revis/engine.h"
#include "sample/sampler.h"

namespace revis {

struct GenerateOptions {
  int max_tokens = 128;               // generated tokens at most; 0 = prefill only
  SamplingParams sampling;
  std::vector<std::string> stop;      // stop strings (not included in the text)
  bool ignore_eog = false;            // keep going past end-of-generation tokens
  bool record_logits = false;         // keep prompt and per-step logits (for --logits-out)
  // With on_prefill, the prompt is evaluated in chunks of kPrefillChunk
  // tokens and on_prefill(done, total) is called after each, counting the
  // prompt tokens not restored from a cache.
  std::function<void(int done, int total)> on_prefill;
  // Polled between prefill chunks and before each token: when it becomes
  // true, generation ends with stop_reason "cancelled" (Ctrl-C in revis
  // chat), or, during the prefill, with an error (the session then holds
  // part of the prompt).
  const std::atomic<bool>* cancel = nullptr;
};

constexpr int kPrefillChunk = 256;

struct GenerateResult {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> generated;     // every sampled token, including a final end-of-generation one
  std::string text;                   // what was streamed
  std::string stop_reason;            // "length", "eog", "stop", "context", "cancelled"
  double prefill_ms = 0, generate_ms = 0, ttft_ms = 0;  // include PromptCache::restore_ms
  int cached_tokens = 0;              // prompt tokens restored instead of evaluated
  // The logits after the last prompt token (what a checkpoint stores).
  std::vector<float> next_logits;
  // With record_logits: one row per prompt position from
  // first_logits_position on (0 after a cold prefill; later after a resume,
  // since restored positions have no logits), and one per generated token
  // but the last (the logits that chose the next token).
  int first_logits_position = 0;
  std::vector<float> prompt_logits, generated_logits;
};

// What a prefix cache restored before generate() (engine/session_pool.h,
// kvstore/prefix_cache.h): the session holds prompt[0, cached_tokens).
// When that is the whole prompt, next_logits are the logits after its last
// token, which the session itself no longer has.
struct PromptCache {
  int cached_tokens = 0;
  std::span<const float> next_logits;
  double restore_ms = 0;  // time spent restoring, counted in prefill and TTFT
};

using TextSink = std::function<void(std::string_view)>;

// Runs the prompt through `session` and generates. Without a cache the
// session is emptied first; with one, it must hold exactly prompt[0,
// cached.cached_tokens). `on_text` receives whole UTF-8 characters as they
// are produced.
Result<GenerateResult> generate(Engine& engine, Session& session, std::span<const int32_t> prompt,
                                const GenerateOptions& options, const TextSink& on_text,
                                const PromptCache& cached = {});

}  // namespace revis
