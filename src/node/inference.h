// The node's generation loop: prefill, then sample and decode one token at a
// time, streaming whole UTF-8 characters, until a token budget, an
// end-of-generation token, a stop string, a full context, or cancellation.
//
// It does what engine/generate.h does, plus what a server needs and a CLI
// does not: a cancel flag polled between prefill chunks and before every
// decoding step (a client that disconnects must free the machine within one
// token, not after max_tokens), a progress callback for the status page, and
// the moment the first token was sampled (time to first token, measured
// where it happens).
//
// Thread-safety: runs on the calling thread; `cancel` may be set from any
// thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/generate.h"
#include "revis/engine.h"
#include "sample/sampler.h"

namespace revis::node {

struct InferenceRequest {
  std::span<const int32_t> prompt;
  // Restored by a prefix cache (kvstore/prefix_cache.h): the session holds
  // prompt[0, cached.cached_tokens) and, for a whole prompt, its logits.
  PromptCache cached;
  int max_tokens = 256;
  SamplingParams sampling;
  std::vector<std::string> stop;
};

struct InferenceControl {
  const std::atomic<bool>* cancel = nullptr;
  std::function<void(std::string_view)> on_text;        // whole UTF-8 characters, stop strings removed
  std::function<void(int n_prompt_done, int n_generated)> on_progress;
  int prefill_chunk = 256;  // tokens per eval during prefill: the cancellation granularity
};

struct InferenceResult {
  std::string text;
  std::string stop_reason;  // "eog", "length", "stop", "context", "cancelled"
  int n_prompt = 0;
  int cached_tokens = 0;    // prompt tokens restored instead of evaluated
  int n_generated = 0;      // sampled tokens, including a final end-of-generation token
  std::vector<float> next_logits;  // after the last prompt token (what a checkpoint keeps)
  double prefill_ms = 0;
  double generate_ms = 0;   // first sampled token -> last
  std::chrono::steady_clock::time_point first_token{};  // when the first token was sampled (epoch if none)
};

// `session` holds request.cached.cached_tokens prompt tokens (none: it is
// emptied first) and then holds the prompt and the output.
Result<InferenceResult> run_inference(Engine& engine, Session& session, const InferenceRequest& request,
                                      const InferenceControl& control);

}  // namespace revis::node
