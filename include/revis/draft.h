// The drafters of speculative decoding (generate.h's Drafter):
//
//   auto lookup = revis::prompt_lookup_drafter();
//   auto model = revis::load_draft_model(*engine, "small.gguf");
//   auto mtp = revis::mtp_drafter(*engine);
//   options.drafter = lookup.get();  options.draft_max = revis::kDefaultDraftMax;
//
// Prompt lookup finds the last few tokens earlier in the context (the
// prompt and the output so far) and proposes what followed them there: no
// second model, and right often when the output copies from the prompt
// (summaries, rewrites, extraction, code edits). A draft model is a
// smaller model of the same vocabulary (or the same model at fewer bits)
// run greedily ahead of the target in a session of its own, kept in step
// with the context it is given.
//
// A multi-token-prediction head (the nextn block of DeepSeek or Qwen3.5, inside the target's
// own file) guesses the token after next from the target's final hidden
// state and the next token's embedding, and chains on its own output: no
// second model, one layer's work per draft token (docs/architecture.md).
//
// All draft deterministically, so the rejection sampler takes their
// distribution as one-hot at the draft. Thread-safety: a drafter is used
// by one generation at a time, on its thread; a draft model evaluates on
// the target engine's thread pool, so target and draft never run at once.
#pragma once

#include <memory>
#include <string>

#include "revis/engine.h"
#include "revis/generate.h"

namespace revis {

// Tokens per draft when a front end is not told: a forward pass over k + 1
// tokens costs more arithmetic than one over a single token (each token
// goes through the single-token kernels to keep the output unchanged), so
// long drafts that are mostly rejected cost more than they save.
constexpr int kDefaultDraftMax = 8;
// The longest draft front ends accept.
constexpr int kMaxDraft = 64;

// Prompt lookup: the longest suffix of the context of max_ngram .. 1
// tokens that occurred before, at its latest occurrence, proposes the
// tokens that followed it, read on into the draft itself where they reach
// the end of the context (so a loop drafts the full `max`).
std::unique_ptr<Drafter> prompt_lookup_drafter(int max_ngram = 3);

// A draft model read from `path` for `target`: its context is the
// target's, it runs on the target's threads, and its vocabulary must be
// the target's token for token (an error names the first difference).
Result<std::unique_ptr<Drafter>> load_draft_model(const Engine& target, const std::string& path);

// The target's multi-token-prediction block as a drafter; an error when the
// model has none (ModelInfo::has_mtp). It reads the hidden states of the
// session generate() evaluates in (Drafter::attach turns on
// Session::keep_hidden_states), and keeps one layer's KV cache of n_ctx
// positions of its own. Runs on the target's threads.
Result<std::unique_ptr<Drafter>> mtp_drafter(const Engine& target);

// What front ends' --draft names: kMtpDraft for mtp_drafter, otherwise a
// draft model's path (a file named "mtp" is "./mtp").
constexpr const char* kMtpDraft = "mtp";
Result<std::unique_ptr<Drafter>> load_drafter(const Engine& target, const std::string& draft);

}  // namespace revis
