// The insides of Engine and Session (revis/engine.h), shared by the engine's
// own files: engine.cpp, the drafters that run the engine's model directly
// (mtp_drafter.cpp), and generate.cpp's detokenizer (engine_tokenizer).
#pragma once

#include <memory>
#include <vector>

#include "engine/recurrent_snapshots.h"
#include "model/model.h"
#include "revis/engine.h"
#include "tokenizer/tokenizer.h"

namespace revis {

struct Engine::Impl {
  ModelInfo info;
  std::shared_ptr<const gguf::GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<ThreadPool> pool;  // shared with a draft model's engine (EngineOptions::share_threads)
};

// The engine's vocabulary, which front ends reach only through Engine's
// methods.
const Tokenizer& engine_tokenizer(const Engine& engine);

struct Session::State {
  KvCache kv;
  std::vector<float> logits;
  int rows = 0;
  // keep_hidden_states: n_ctx rows of the nextn hidden width, by position, and which rows
  // an eval wrote (rows restored from a checkpoint have none).
  std::vector<float> hidden;
  std::vector<bool> hidden_known;
  // Hybrids: the recurrent state at earlier positions; deepseek4: its
  // compressors' tail (model/compressor_cache.h) there.
  RecurrentSnapshots snapshots;
  // Hybrids, keep_recent_states: the state after position q (recent_first
  // <= q <= n_past, fewer than recent_slots back) in slot q % recent_slots,
  // and each token's slot for the eval under way.
  std::vector<float> recent;
  int recent_slots = 0, recent_first = 1;
  std::vector<float*> recent_dest;
  // deepseek4: a tail on its way to or from a checkpoint; staged: one was
  // handed out to read a checkpoint's into (recurrent_state()), which the
  // next adopt_kv takes.
  std::vector<float> tail;
  bool tail_staged = false;
};

}  // namespace revis
