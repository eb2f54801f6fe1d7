#include "node/executor.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "base/log.h"
#include "chat/answer_stream.h"
#include "grammar/grammar_constraint.h"
#include "node/job_prompt.h"

namespace revis::node {
namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// How many tokens the answer may have: the job's max_tokens (<= 0: until the
// context is full), within the room the prompt leaves; too_long when the
// prompt alone fills the context.
Outcome<int> answer_budget(const JobSpec& spec, int n_prompt, int n_ctx, const std::string& tier) {
  if (n_prompt == 0) return NodeError{ErrorCode::kBadRequest, "the prompt is empty"};
  if (n_prompt >= n_ctx)
    return NodeError{ErrorCode::kTooLong, "the prompt has " + std::to_string(n_prompt) + " tokens but the context of tier " +
                                              tier + " holds " + std::to_string(n_ctx) + " (including room for the answer)"};
  const int room = n_ctx - n_prompt;
  return spec.max_tokens <= 0 ? room : std::min(spec.max_tokens, room);
}

}  // namespace

Executor::Executor(TierPool& pool, Metrics& metrics, ExecutorOptions options)
    : pool_(pool), metrics_(metrics), options_(std::move(options)), queue_(options_.queue_limit) {}

Executor::~Executor() {
  if (thread_.joinable()) shutdown(std::chrono::milliseconds(0));
}

void Executor::start(std::optional<std::string> preload_tier, std::function<void(const Status&)> on_preloaded) {
  thread_ = std::thread([this, preload_tier, on_preloaded] { loop(preload_tier, on_preloaded); });
}

void Executor::loop(std::optional<std::string> preload_tier, std::function<void(const Status&)> on_preloaded) {
  if (preload_tier) {
    Status s;
    if (const TierSpec* tier = pool_.resolve(*preload_tier)) {
      {
        MutexLock lock(mutex_);
        current_ = CurrentJob{};
        current_.tier = tier->name;
        current_.phase = "loading";
      }
      auto model = pool_.acquire(*tier);
      if (!model.ok()) s = model.status();
    } else {
      s = Status::error("no tier named " + *preload_tier);
    }
    {
      MutexLock lock(mutex_);
      ready_ = true;
      current_ = CurrentJob{};
      if (!s.ok()) preload_error_ = s.message();
    }
    if (on_preloaded) on_preloaded(s);
  } else {
    MutexLock lock(mutex_);
    ready_ = true;
  }
  // Until ready, peers saw this node busy; without this they would learn it
  // is idle only at its next heartbeat, and send it nothing meanwhile.
  if (on_change_) on_change_();

  while (true) {
    std::shared_ptr<QueuedJob> job;
    {
      MutexLock lock(mutex_);
      while (!stop_thread_ && queue_.empty()) wake_.wait(mutex_);
      if (queue_.empty()) break;  // stopping, and nothing left to run
      job = queue_.pop();
      running_ = job;
      ++executed_;
      current_ = CurrentJob{};
      current_.source = job->spec.source;
      current_.label = job->spec.label;
      current_.task = job->spec.task;
      current_.tier = job->spec.tier;
      current_.phase = "loading";
    }
    if (on_change_) on_change_();
    run(*job);
    bool idle = false;
    {
      MutexLock lock(mutex_);
      running_.reset();
      idle = queue_.empty();
    }
    // A checkpoint the job left to write in the background is indexed (and
    // its prefixes published) once nothing else waits to run.
    if (idle) pool_.finish_kv_saves();
    wake_.notify_all();  // shutdown() may be waiting for the running job
    if (on_change_) on_change_();
  }
}

void Executor::run(QueuedJob& job) {
  const auto start = Clock::now();
  Outcome<JobResult> outcome = NodeError{ErrorCode::kInternal, "not run"};
  try {
    outcome = execute(job);
  } catch (const std::exception& e) {
    // Nothing below is meant to throw; if allocation fails or a bug throws,
    // the client still gets its one terminal event and the node goes on.
    outcome = NodeError{ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()};
    log_line("error", "job " + job.spec.label + ": " + outcome.error().message);
  }
  {
    MutexLock lock(mutex_);
    avg_job_s_ = 0.8 * avg_job_s_ + 0.2 * std::chrono::duration<double>(Clock::now() - start).count();
  }
  finish(job, std::move(outcome));
}

NodeError Executor::cancellation(const QueuedJob& job) const {
  MutexLock lock(mutex_);
  return NodeError{ErrorCode::kCancelled, job.cancel_reason.empty() ? "cancelled" : job.cancel_reason};
}

Outcome<JobResult> Executor::execute(QueuedJob& job) {
  const JobSpec& spec = job.spec;
  const Clock::time_point started = Clock::now();
  JobResult result;
  JobStats& st = result.stats;
  st.node = options_.node_name;
  st.catalog_digest = options_.catalog_digest;
  st.queue_wait_ms = ms_between(spec.received, started);
  st.started_ms = ms_between(options_.node_start, started);
  st.seed = spec.sampling.seed;
  {
    MutexLock lock(mutex_);
    st.exec_index = executed_;
  }
  if (job.cancel.load()) return cancellation(job);
  if (!spec.embed.empty()) return embed(job, std::move(result));

  GenerateOptions options;
  options.sampling = spec.sampling;
  options.stop = spec.stop;
  options.cancel = &job.cancel;
  options.on_progress = [this](int prompt_done, int generated) {
    MutexLock lock(mutex_);
    current_.prompt_done = prompt_done;
    current_.generated = generated;
    if (generated > 0) current_.phase = "generating";
  };
  auto r = options_.sim ? infer_simulated(job, result, options) : infer_with_model(job, result, options);
  if (!r.ok()) return r.error();
  if (r->stop_reason == "cancelled") return cancellation(job);

  const Clock::time_point finished = Clock::now();
  result.text = std::move(r->text);
  result.stop_reason = r->stop_reason;
  result.stop_sequence = r->stop_sequence;
  const int n_generated = static_cast<int>(r->generated.size());
  st.prompt_tokens = r->n_prompt;
  st.cached_tokens = r->cached_tokens;
  st.generated_tokens = n_generated;
  st.draft_tokens = r->draft_tokens;
  st.accepted_tokens = r->accepted_tokens;
  st.prefill_ms = r->prefill_ms;
  st.generate_ms = r->generate_ms;
  st.prefill_tok_s = r->prefill_ms > 0 ? r->n_prompt * 1000.0 / r->prefill_ms : 0;
  // The first token comes from the prefill's logits; each later one costs a
  // forward pass, so the rate counts n - 1 tokens over the decoding time.
  st.gen_tok_s = r->generate_ms > 0 && n_generated > 1 ? (n_generated - 1) * 1000.0 / r->generate_ms : 0;
  st.ttft_ms = n_generated > 0 ? ms_between(spec.received, r->first_token) : 0;
  st.total_ms = ms_between(spec.received, finished);
  st.finished_ms = ms_between(options_.node_start, finished);
  return result;
}

Outcome<Executor::TierModel> Executor::load_model(const JobSpec& spec, JobStats& st) {
  const TierSpec* tier = pool_.resolve(spec.tier);
  if (!tier) return NodeError{ErrorCode::kModelUnavailable, "this node serves no tier \"" + spec.tier + "\""};
  auto loaded = pool_.acquire(*tier, &st.load_ms);
  if (!loaded.ok())
    return NodeError{ErrorCode::kModelUnavailable, "tier " + tier->name + ": " + loaded.status().message()};
  st.tier = tier->name;
  st.model = std::filesystem::path((*loaded)->path).filename().string();
  st.model_digest = (*loaded)->engine->info().digest;
  return TierModel{tier, *loaded};
}

Outcome<GenerateResult> Executor::infer_with_model(QueuedJob& job, JobResult& result, GenerateOptions& options) {
  const JobSpec& spec = job.spec;
  JobStats& st = result.stats;
  auto loaded = load_model(spec, st);
  if (!loaded.ok()) return loaded.error();
  const TierSpec* tier = loaded->tier;
  LoadedModel& model = *loaded->model;
  Engine& engine = *model.engine;
  st.chat_template = spec.raw ? "raw" : model.chat.origin;

  auto prompt = job_prompt_tokens(model, spec);
  if (!prompt.ok()) return NodeError{ErrorCode::kBadRequest, "chat template: " + prompt.status().message()};
  const std::vector<int32_t>& tokens = prompt->tokens;
  auto max_tokens = answer_budget(spec, static_cast<int>(tokens.size()), engine.info().n_ctx, tier->name);
  if (!max_tokens.ok()) return max_tokens.error();
  begin_prefill(tier->name, static_cast<int>(tokens.size()), *max_tokens);

  options.max_tokens = *max_tokens;
  const int n_vocab = engine.info().n_vocab;
  for (const auto& [token, bias] : spec.sampling.logit_bias)
    if (token >= n_vocab)
      return NodeError{ErrorCode::kBadRequest, "logit_bias: token " + std::to_string(token) + " is outside the vocabulary of tier " +
                                                   tier->name + " (0.." + std::to_string(n_vocab - 1) + ")"};
  // With tools, the output is read for calls in the template's syntax (the
  // generic format where it has none); a required call, and any generic
  // answer, is enforced with its grammar.
  const bool reads_tools = !spec.raw && spec.chat_options.tools.has_value();
  const ToolFormat tool_format = model.chat.tool_calls_format();
  std::shared_ptr<const Grammar> grammar = spec.grammar;
  if (reads_tools && tool_call_grammar_applies(tool_format, spec.tool_use)) {
    if (grammar)
      return NodeError{ErrorCode::kBadRequest,
                       "response_format/grammar: the chat template of tier " + tier->name + " (" + model.chat.origin +
                           ") has no tool-call syntax, so with tools the whole answer is the generic tool-call JSON; "
                           "send tools or response_format, not both"};
    // A template that opened a thinking block in the prompt gets it closed first.
    const std::string preamble = prompt->opens_reasoning ? model.chat.reasoning->close + "\n\n" : "";
    auto calls = tool_call_grammar(tool_format, *spec.chat_options.tools, spec.tool_use, preamble);
    if (!calls.ok()) return NodeError{ErrorCode::kBadRequest, calls.status().message()};
    grammar = std::move(*calls);
  }
  if (!spec.raw) options.shown_tokens = model.shown_tokens;
  // Speculative decoding: the tier's draft model, else prompt lookup where
  // the tier or the task asks for it.
  std::unique_ptr<Drafter> lookup;
  if (model.draft_model) {
    options.drafter = model.draft_model.get();
  } else if (tier->lookup || spec.lookup) {
    lookup = prompt_lookup_drafter();
    options.drafter = lookup.get();
  }
  options.draft_max = tier->draft_max > 0 ? tier->draft_max : kDefaultDraftMax;
  std::unique_ptr<GrammarConstraint> constraint;
  if (grammar) {
    if (!model.vocabulary) model.vocabulary = TokenVocabulary::of(engine, model.shown_tokens);  // once per loaded model
    constraint = std::make_unique<GrammarConstraint>(grammar, model.vocabulary);
    options.constraint = constraint.get();
  }
  // With logprobs, each token's go out with the next piece of text (and all
  // of them in the result). An end-of-generation token has no text, and, as
  // in OpenAI's answers, no entry.
  options.logprobs = spec.logprobs;
  options.top_logprobs = spec.top_logprobs;
  std::vector<LogprobEntry> unsent;
  if (spec.logprobs)
    options.on_logprobs = [&](const TokenLogprobs& lp) {
      if (engine.is_end_of_generation(lp.chosen.token)) return;
      LogprobEntry entry{{engine.token_bytes(lp.chosen.token), lp.chosen.logprob}, {}};
      for (const revis::TokenLogprob& alt : lp.top) entry.top.push_back({engine.token_bytes(alt.token), alt.logprob});
      result.logprobs.push_back(entry);
      unsent.push_back(std::move(entry));
    };
  TextSink on_text;
  if (job.callbacks.on_text)
    on_text = [&](std::string_view text) {
      job.callbacks.on_text(text, unsent);
      unsent.clear();
    };
  // The session comes from the model's prefix cache, holding as much of the
  // prompt as an earlier job (in RAM) or a checkpoint (on disk) provides.
  auto lease = model.cache->acquire(tokens);
  if (!lease.ok()) return NodeError{ErrorCode::kInternal, "prompt cache: " + lease.status().message()};
  // The output is split into the thinking, the answer and tool calls as it
  // streams (answer_stream.h). Log-probabilities of thinking tokens and held
  // text go out with the next piece of the answer.
  std::optional<ReasoningSplitter> thinking;
  if (!spec.raw && model.chat.reasoning) thinking.emplace(*model.chat.reasoning, prompt->opens_reasoning);
  std::optional<ToolCallSplitter> calls;
  if (reads_tools) calls.emplace(tool_format, spec.chat_options.tools.value_or(nlohmann::ordered_json()));
  const bool harmony = !spec.raw && model.chat.tool_format == ToolFormat::kHarmony;
  AnswerStream answer = harmony ? AnswerStream(HarmonySplitter(reads_tools), on_text, job.callbacks.on_reasoning)
                                : AnswerStream(std::move(thinking), std::move(calls), on_text, job.callbacks.on_reasoning);
  auto r = generate(
      engine, *lease->session, tokens, options, [&](std::string_view piece) { answer.feed(piece); }, lease->cached);
  if (r.ok()) {
    answer.finish(spec.label);
    r->text = answer.content();
    if (!spec.raw && (model.chat.reasoning || harmony)) result.reasoning = answer.reasoning();
    result.tool_calls = std::move(answer.calls());
    if (!spec.tool_use.parallel && result.tool_calls.size() > 1) result.tool_calls.resize(1);
  }
  if (r.ok() && !r->next_logits.empty()) {
    model.cache->release(std::move(*lease), tokens, r->next_logits);
    pool_.refresh_kv_prefixes(model);
  } else {
    model.cache->discard(std::move(*lease));  // a failed or interrupted prefill leaves rows not worth keeping
  }
  if (!r.ok()) return NodeError{ErrorCode::kInternal, "inference failed: " + r.status().message()};
  return std::move(*r);
}

Outcome<GenerateResult> Executor::infer_simulated(QueuedJob& job, JobResult& result, GenerateOptions& options) {
  const JobSpec& spec = job.spec;
  JobStats& st = result.stats;
  const SimEngineOptions& sim = *options_.sim;
  // Its words come from no vocabulary: nothing to constrain or score.
  if (spec.grammar) return NodeError{ErrorCode::kBadRequest, "the simulated engine cannot follow a grammar or JSON schema"};
  if (spec.logprobs) return NodeError{ErrorCode::kBadRequest, "the simulated engine has no logprobs"};
  if (spec.chat_options.tools) return NodeError{ErrorCode::kBadRequest, "the simulated engine cannot call tools"};
  st.engine = "sim";
  st.tier = spec.tier;
  st.model = "sim";
  st.model_digest = "sim";
  st.chat_template = spec.raw ? "raw" : "sim";
  int n_prompt = estimate_tokens(spec.prompt);
  for (const ChatMessage& m : spec.messages) n_prompt += estimate_tokens(m.content) + 4;  // + role markers
  auto max_tokens = answer_budget(spec, n_prompt, sim.ctx, spec.tier);
  if (!max_tokens.ok()) return max_tokens.error();
  begin_prefill(spec.tier, n_prompt, *max_tokens);
  options.max_tokens = *max_tokens;
  TextSink on_text;
  if (job.callbacks.on_text) on_text = [&](std::string_view text) { job.callbacks.on_text(text, {}); };
  auto r = run_simulated_inference(sim, n_prompt, options, on_text);
  if (!r.ok()) return NodeError{ErrorCode::kInternal, "simulated inference failed: " + r.status().message()};
  return std::move(*r);
}

Outcome<JobResult> Executor::embed(QueuedJob& job, JobResult result) {
  const JobSpec& spec = job.spec;
  JobStats& st = result.stats;
  if (options_.sim) return NodeError{ErrorCode::kBadRequest, "the simulated engine has no embeddings"};
  auto loaded = load_model(spec, st);
  if (!loaded.ok()) return loaded.error();
  LoadedModel& model = *loaded->model;
  Engine& engine = *model.engine;
  const ModelInfo& info = engine.info();
  st.chat_template = "raw";
  // Every input is checked before any runs: a bad one fails the request at once.
  std::vector<std::vector<int32_t>> inputs;
  int total = 0;
  for (size_t i = 0; i < spec.embed.size(); ++i) {
    const std::string at = "input[" + std::to_string(i) + "]";
    std::vector<int32_t> tokens;
    if (const auto* text = std::get_if<std::string>(&spec.embed[i])) {
      tokens = engine.tokenize(*text, engine.add_bos_default(), /*parse_special=*/false);
    } else {
      tokens = std::get<std::vector<int32_t>>(spec.embed[i]);
      for (int32_t t : tokens)
        if (t < 0 || t >= info.n_vocab)
          return NodeError{ErrorCode::kBadRequest, at + ": token " + std::to_string(t) + " is outside the vocabulary of tier " +
                                                       st.tier + " (0.." + std::to_string(info.n_vocab - 1) + ")"};
    }
    if (tokens.empty()) return NodeError{ErrorCode::kBadRequest, at + " has no tokens"};
    if (static_cast<int>(tokens.size()) > info.n_ctx)
      return NodeError{ErrorCode::kTooLong, at + " has " + std::to_string(tokens.size()) + " tokens but the context of tier " +
                                                st.tier + " holds " + std::to_string(info.n_ctx)};
    total += static_cast<int>(tokens.size());
    inputs.push_back(std::move(tokens));
  }
  begin_prefill(st.tier, total, 0);
  const Clock::time_point start = Clock::now();
  // A session of the tier's pool, emptied: every input starts from nothing,
  // and its rows are not worth keeping.
  auto lease = model.cache->acquire({});
  if (!lease.ok()) return NodeError{ErrorCode::kInternal, "prompt cache: " + lease.status().message()};
  int done = 0;
  for (const std::vector<int32_t>& tokens : inputs) {
    if (job.cancel.load()) break;
    lease->session->truncate(0);
    auto mean = lease->session->mean_hidden_state(tokens);
    if (!mean.ok()) {
      model.cache->discard(std::move(*lease));
      return NodeError{ErrorCode::kInternal, "embedding failed: " + mean.status().message()};
    }
    // Scaled to length 1 (llama.cpp's default for its OpenAI endpoint), so
    // that a dot product is the cosine similarity.
    double norm = 0;
    for (float v : *mean) norm += static_cast<double>(v) * v;
    norm = std::sqrt(norm);
    if (norm > 0)
      for (float& v : *mean) v = static_cast<float>(v / norm);
    result.embeddings.push_back(std::move(*mean));
    done += static_cast<int>(tokens.size());
    {
      MutexLock lock(mutex_);
      current_.prompt_done = done;
    }
  }
  model.cache->discard(std::move(*lease));
  if (job.cancel.load()) return cancellation(job);
  const Clock::time_point finished = Clock::now();
  result.stop_reason = "eog";
  st.prompt_tokens = total;
  st.prefill_ms = ms_between(start, finished);
  st.prefill_tok_s = st.prefill_ms > 0 ? total * 1000.0 / st.prefill_ms : 0;
  st.total_ms = ms_between(spec.received, finished);
  st.finished_ms = ms_between(options_.node_start, finished);
  return result;
}

void Executor::begin_prefill(const std::string& tier, int prompt_tokens, int max_tokens) {
  MutexLock lock(mutex_);
  current_.tier = tier;
  current_.phase = "prefill";
  current_.prompt_tokens = prompt_tokens;
  current_.max_tokens = max_tokens;
}

void Executor::finish(QueuedJob& job, Outcome<JobResult> outcome) {
  if (outcome.ok()) {
    metrics_.job_finished(job.spec.source, "done", &outcome->stats);
  } else {
    metrics_.job_finished(job.spec.source, error_code_name(outcome.error().code), nullptr);
  }
  if (job.callbacks.on_finish) job.callbacks.on_finish(std::move(outcome));
}

Outcome<Admission> Executor::submit(JobSpec spec, JobCallbacks callbacks, bool first) {
  Admission a;
  {
    MutexLock lock(mutex_);
    if (stopping_) return NodeError{ErrorCode::kCancelled, "the node is shutting down"};
    if (queue_.full() && !first)
      return NodeError{ErrorCode::kQueueFull, "the queue is full (" + std::to_string(queue_.size()) +
                                                  " jobs waiting); try again later or another node"};
    auto job = std::make_shared<QueuedJob>();
    job->id = next_id_++;
    job->spec = std::move(spec);
    job->callbacks = std::move(callbacks);
    a.job_id = job->id;
    a.position = first ? (running_ ? 1 : 0) : static_cast<int>(queue_.size()) + (running_ ? 1 : 0);
    if (first) queue_.push_front(std::move(job));
    else queue_.push(std::move(job));
  }
  wake_.notify_all();
  return a;
}

std::shared_ptr<QueuedJob> Executor::take_queued(const std::function<bool(const JobSpec&)>& pick) {
  MutexLock lock(mutex_);
  if (stopping_) return nullptr;
  // With nothing running on a ready executor, the oldest job is not waiting:
  // this thread is about to start it (it may just not have been scheduled
  // yet), so moving it would only add a hop.
  const QueuedJob* starting_here = !running_ && ready_ && !queue_.empty() ? queue_.front().get() : nullptr;
  std::shared_ptr<QueuedJob> found =
      queue_.find_first([&](const QueuedJob& job) { return &job != starting_here && pick(job.spec); });
  if (found) queue_.remove(found->id);
  return found;
}

bool Executor::cancel(uint64_t job_id, const std::string& reason) {
  std::shared_ptr<QueuedJob> removed;
  {
    MutexLock lock(mutex_);
    removed = queue_.remove(job_id);
    if (!removed) {
      if (!running_ || running_->id != job_id) return false;
      if (!running_->cancel.load()) {
        running_->cancel_reason = reason;
        running_->cancel.store(true);
      }
      return true;
    }
  }
  finish(*removed, NodeError{ErrorCode::kCancelled, reason});
  return true;
}

void Executor::shutdown(std::chrono::milliseconds grace) {
  std::vector<std::shared_ptr<QueuedJob>> dropped;
  {
    MutexLock lock(mutex_);
    stopping_ = true;
    dropped = queue_.drain();
  }
  for (auto& job : dropped) finish(*job, NodeError{ErrorCode::kCancelled, "the node is shutting down"});
  {
    MutexLock lock(mutex_);
    const auto deadline = Clock::now() + grace;
    while (running_ && wake_.wait_until(mutex_, deadline)) {
    }
    if (running_ && !running_->cancel.load()) {
      running_->cancel_reason = "the node is shutting down";
      running_->cancel.store(true);
    }
    stop_thread_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

ExecutorSnapshot Executor::snapshot() const {
  MutexLock lock(mutex_);
  ExecutorSnapshot s;
  s.ready = ready_;
  s.stopping = stopping_;
  s.preload_error = preload_error_;
  if (running_ || (!ready_ && !current_.phase.empty())) {
    s.current = current_;
    if (running_) s.current->elapsed_ms = ms_between(running_->spec.received, Clock::now());
  }
  s.queue_length = static_cast<int>(queue_.size());
  s.queue_limit = static_cast<int>(queue_.capacity());
  s.executed = executed_;
  return s;
}

bool Executor::ready() const {
  MutexLock lock(mutex_);
  return ready_;
}

int Executor::retry_after_seconds() const {
  MutexLock lock(mutex_);
  const double wait = avg_job_s_ * (static_cast<double>(queue_.size()) + 1);
  return static_cast<int>(std::clamp(std::ceil(wait), 1.0, 300.0));
}

void log_job_run(const std::string& id, const JobStats& s) {
  char line[256];
  std::snprintf(line, sizeof line, "ran ticket %s exec %llu from %.3f ms to %.3f ms (%d tokens, %.1f tok/s)", id.c_str(),
                static_cast<unsigned long long>(s.exec_index), s.started_ms, s.finished_ms, s.generated_tokens, s.gen_tok_s);
  log_line("info", line);
}

}  // namespace revis::node
