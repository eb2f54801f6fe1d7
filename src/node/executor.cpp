#include "node/executor.h"

#include <algorithm>
#include <cassert>
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

// The result's stop fields and the statistics of a generation that ended.
void fill_generation_stats(const JobSpec& spec, const GenerateResult& r, JobResult& result, Clock::time_point node_start) {
  const Clock::time_point finished = Clock::now();
  result.stop_reason = r.stop_reason;
  result.stop_sequence = r.stop_sequence;
  JobStats& st = result.stats;
  const int n_generated = static_cast<int>(r.generated.size());
  st.prompt_tokens = r.n_prompt;
  st.cached_tokens = r.cached_tokens;
  st.generated_tokens = n_generated;
  st.draft_tokens = r.draft_tokens;
  st.accepted_tokens = r.accepted_tokens;
  st.prefill_ms = r.prefill_ms;
  st.generate_ms = r.generate_ms;
  st.prefill_tok_s = r.prefill_ms > 0 ? r.n_prompt * 1000.0 / r.prefill_ms : 0;
  // The first token comes from the prefill's logits; each later one costs a
  // forward pass, so the rate counts n - 1 tokens over the decoding time.
  st.gen_tok_s = r.generate_ms > 0 && n_generated > 1 ? (n_generated - 1) * 1000.0 / r.generate_ms : 0;
  st.ttft_ms = n_generated > 0 ? ms_between(spec.received, r.first_token) : 0;
  st.total_ms = ms_between(spec.received, finished);
  st.finished_ms = ms_between(node_start, finished);
}

}  // namespace

// A generation job in the batch: what its GenerationBatch entry points to
// (the prompt, the options and what they point to, the session), and what
// reads its output.
struct Executor::Slot {
  std::shared_ptr<QueuedJob> job;
  Clock::time_point started;
  JobResult result;
  LoadedModel* model = nullptr;
  JobPrompt prompt;
  GenerateOptions options;
  std::unique_ptr<Drafter> drafter;  // this slot's own, where it needs one
  std::unique_ptr<GrammarConstraint> constraint;
  std::vector<LogprobEntry> unsent;  // logprobs not yet sent with a piece of text
  std::optional<AnswerStream> answer;
  bool harmony = false;
  std::optional<kvstore::PrefixCache::Lease> lease;
  bool done = false;
};

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
        progress_[0] = CurrentJob{.tier = tier->name, .phase = "loading"};
      }
      auto model = pool_.acquire(*tier);
      if (model.ok()) {
        MutexLock lock(mutex_);
        slots_ = (*model)->slots;
      } else {
        s = model.status();
      }
    } else {
      s = Status::error("no tier named " + *preload_tier);
    }
    {
      MutexLock lock(mutex_);
      ready_ = true;
      progress_.clear();
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
      while (!stop_thread_ && running_.empty() && queue_.empty()) wake_.wait(mutex_);
      if (running_.empty() && queue_.empty()) break;  // stopping, and nothing left to run
      if (next_job_fits()) {
        job = queue_.pop();
        running_.push_back(job);
        ++executed_;
        progress_[job->id] = CurrentJob{.job_id = job->id,
                                        .source = job->spec.source,
                                        .label = job->spec.label,
                                        .task = job->spec.task,
                                        .tier = job->spec.tier,
                                        .phase = "loading"};
      }
    }
    if (job) {
      if (on_change_) on_change_();
      admit(job);
      continue;  // every job that fits joins before the next pass
    }
    if (batch_ && batch_->step() == 0) {
      // Empty, it is dropped: the next job may need another model, and this
      // one may be unloaded meanwhile.
      batch_.reset();
      batch_model_ = nullptr;
    }
    std::erase_if(slots_in_use_, [](const std::unique_ptr<Slot>& slot) { return slot->done; });
  }
}

bool Executor::next_job_fits() const {
  if (queue_.empty()) return false;
  if (running_.empty()) return true;
  const JobSpec& next = queue_.front()->spec;
  return batch_tier_ && static_cast<int>(running_.size()) < slots_ && next.embed.empty() && !options_.sim &&
         pool_.resolve(next.tier) == batch_tier_;
}

void Executor::admit(const std::shared_ptr<QueuedJob>& job) {
  if (options_.sim || !job->spec.embed.empty()) return run_alone(*job);
  const Clock::time_point started = Clock::now();
  Outcome<std::unique_ptr<Slot>> prepared = NodeError{ErrorCode::kInternal, "not run"};
  try {
    prepared = prepare(job);
  } catch (const std::exception& e) {
    prepared = NodeError{ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()};
    log_line("error", "job " + job->spec.label + ": " + prepared.error().message);
  }
  if (!prepared.ok()) return finish(*job, prepared.error(), started);
  Slot& slot = **prepared;
  slot.started = started;
  if (!batch_) {
    batch_ = std::make_unique<GenerationBatch>(*slot.model->engine, options_.step_tokens);
    batch_model_ = slot.model;
  }
  assert(batch_model_ == slot.model);  // next_job_fits() lets in one tier at a time
  {
    MutexLock lock(mutex_);
    batch_tier_ = pool_.resolve(job->spec.tier);
    slots_ = slot.model->slots;
  }
  slots_in_use_.push_back(std::move(*prepared));
  batch_->add(
      *slot.lease->session, slot.prompt.tokens, slot.options, [&slot](std::string_view piece) { slot.answer->feed(piece); },
      [this, &slot](Result<GenerateResult> generated) { complete(slot, std::move(generated)); }, slot.lease->cached);
}

void Executor::run_alone(QueuedJob& job) {
  const Clock::time_point started = Clock::now();
  Outcome<JobResult> outcome = NodeError{ErrorCode::kInternal, "not run"};
  try {
    outcome = execute_alone(job);
  } catch (const std::exception& e) {
    // Nothing below is meant to throw; if allocation fails or a bug throws,
    // the client still gets its one terminal event and the node goes on.
    outcome = NodeError{ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()};
    log_line("error", "job " + job.spec.label + ": " + outcome.error().message);
  }
  finish(job, std::move(outcome), started);
}

NodeError Executor::cancellation(const QueuedJob& job) const {
  MutexLock lock(mutex_);
  return NodeError{ErrorCode::kCancelled, job.cancel_reason.empty() ? "cancelled" : job.cancel_reason};
}

JobResult Executor::begin_job(const QueuedJob& job) {
  const JobSpec& spec = job.spec;
  const Clock::time_point started = Clock::now();
  JobResult result;
  JobStats& st = result.stats;
  st.node = options_.node_name;
  st.catalog_digest = options_.catalog_digest;
  st.queue_wait_ms = ms_between(spec.received, started);
  st.started_ms = ms_between(options_.node_start, started);
  st.seed = spec.sampling.seed;
  MutexLock lock(mutex_);
  st.exec_index = executed_;
  return result;
}

std::function<void(int, int)> Executor::progress_of(uint64_t job_id) {
  return [this, job_id](int prompt_done, int generated) {
    MutexLock lock(mutex_);
    CurrentJob& c = progress_[job_id];
    c.prompt_done = prompt_done;
    c.generated = generated;
    if (generated > 0) c.phase = "generating";
  };
}

Outcome<JobResult> Executor::execute_alone(QueuedJob& job) {
  JobResult result = begin_job(job);
  if (job.cancel.load()) return cancellation(job);
  if (!job.spec.embed.empty()) return embed(job, std::move(result));
  GenerateOptions options;
  options.sampling = job.spec.sampling;
  options.stop = job.spec.stop;
  options.cancel = &job.cancel;
  options.on_progress = progress_of(job.id);
  auto r = infer_simulated(job, result, options);
  if (!r.ok()) return r.error();
  if (r->stop_reason == "cancelled") return cancellation(job);
  result.text = std::move(r->text);
  fill_generation_stats(job.spec, *r, result, options_.node_start);
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

Outcome<std::unique_ptr<Executor::Slot>> Executor::prepare(const std::shared_ptr<QueuedJob>& job) {
  const JobSpec& spec = job->spec;
  auto slot = std::make_unique<Slot>();
  slot->job = job;
  slot->result = begin_job(*job);
  if (job->cancel.load()) return cancellation(*job);
  JobStats& st = slot->result.stats;
  auto loaded = load_model(spec, st);
  if (!loaded.ok()) return loaded.error();
  const TierSpec* tier = loaded->tier;
  LoadedModel& model = *loaded->model;
  slot->model = &model;
  Engine& engine = *model.engine;
  st.chat_template = spec.raw ? "raw" : model.chat.origin;

  auto prompt = job_prompt_tokens(model, spec);
  if (!prompt.ok()) return NodeError{ErrorCode::kBadRequest, "chat template: " + prompt.status().message()};
  slot->prompt = std::move(*prompt);
  const std::vector<int32_t>& tokens = slot->prompt.tokens;
  auto max_tokens = answer_budget(spec, static_cast<int>(tokens.size()), engine.info().n_ctx, tier->name);
  if (!max_tokens.ok()) return max_tokens.error();
  begin_prefill(job->id, tier->name, static_cast<int>(tokens.size()), *max_tokens);

  GenerateOptions& options = slot->options;
  options.sampling = spec.sampling;
  options.stop = spec.stop;
  options.cancel = &job->cancel;
  options.on_progress = progress_of(job->id);
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
    const std::string preamble = slot->prompt.opens_reasoning ? model.chat.reasoning->close + "\n\n" : "";
    auto calls = tool_call_grammar(tool_format, *spec.chat_options.tools, spec.tool_use, preamble);
    if (!calls.ok()) return NodeError{ErrorCode::kBadRequest, calls.status().message()};
    grammar = std::move(*calls);
  }
  if (!spec.raw) options.shown_tokens = model.shown_tokens;
  // Speculative decoding: the tier's drafter (a draft model, the MTP
  // block), else prompt lookup where the tier or the task asks for it. A
  // drafter keeps one sequence's state: a slot that starts while another
  // drafts with the tier's gets a copy of its own (Drafter::another), the
  // weights shared.
  if (model.draft_model) {
    const bool in_use = std::any_of(slots_in_use_.begin(), slots_in_use_.end(), [&](const auto& other) {
      return !other->done && other->options.drafter == model.draft_model.get();
    });
    if (in_use) slot->drafter = model.draft_model->another();
    options.drafter = in_use ? slot->drafter.get() : model.draft_model.get();
  } else if (tier->lookup || spec.lookup) {
    slot->drafter = prompt_lookup_drafter();
    options.drafter = slot->drafter.get();
  }
  options.draft_max = tier->draft_max > 0 ? tier->draft_max : kDefaultDraftMax;
  if (grammar) {
    if (!model.vocabulary) model.vocabulary = TokenVocabulary::of(engine, model.shown_tokens);  // once per loaded model
    slot->constraint = std::make_unique<GrammarConstraint>(grammar, model.vocabulary);
    options.constraint = slot->constraint.get();
  }
  // With logprobs, each token's go out with the next piece of text (and all
  // of them in the result). An end-of-generation token has no text, and, as
  // in OpenAI's answers, no entry.
  options.logprobs = spec.logprobs;
  options.top_logprobs = spec.top_logprobs;
  Slot* s = slot.get();
  if (spec.logprobs)
    options.on_logprobs = [s, &engine](const TokenLogprobs& lp) {
      if (engine.is_end_of_generation(lp.chosen.token)) return;
      LogprobEntry entry{{engine.token_bytes(lp.chosen.token), lp.chosen.logprob}, {}};
      for (const revis::TokenLogprob& alt : lp.top) entry.top.push_back({engine.token_bytes(alt.token), alt.logprob});
      s->result.logprobs.push_back(entry);
      s->unsent.push_back(std::move(entry));
    };
  TextSink on_text;
  if (job->callbacks.on_text)
    on_text = [s](std::string_view text) {
      s->job->callbacks.on_text(text, s->unsent);
      s->unsent.clear();
    };
  // The output is split into the thinking, the answer and tool calls as it
  // streams (answer_stream.h). Log-probabilities of thinking tokens and held
  // text go out with the next piece of the answer.
  std::optional<ReasoningSplitter> thinking;
  if (!spec.raw && model.chat.reasoning) thinking.emplace(*model.chat.reasoning, slot->prompt.opens_reasoning);
  std::optional<ToolCallSplitter> calls;
  if (reads_tools) calls.emplace(tool_format, spec.chat_options.tools.value_or(nlohmann::ordered_json()));
  slot->harmony = !spec.raw && model.chat.tool_format == ToolFormat::kHarmony;
  if (slot->harmony)
    slot->answer.emplace(HarmonySplitter(reads_tools), on_text, job->callbacks.on_reasoning);
  else
    slot->answer.emplace(std::move(thinking), std::move(calls), on_text, job->callbacks.on_reasoning);
  // The session comes from the model's prefix cache, holding as much of the
  // prompt as an earlier job (in RAM) or a checkpoint (on disk) provides.
  auto lease = model.cache->acquire(tokens);
  if (!lease.ok()) return NodeError{ErrorCode::kInternal, "prompt cache: " + lease.status().message()};
  slot->lease = std::move(*lease);
  return slot;
}

void Executor::complete(Slot& slot, Result<GenerateResult> generated) {
  Outcome<JobResult> outcome = NodeError{ErrorCode::kInternal, "not run"};
  try {
    outcome = completed(slot, std::move(generated));
  } catch (const std::exception& e) {
    outcome = NodeError{ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()};
    log_line("error", "job " + slot.job->spec.label + ": " + outcome.error().message);
  }
  slot.done = true;
  finish(*slot.job, std::move(outcome), slot.started);
}

Outcome<JobResult> Executor::completed(Slot& slot, Result<GenerateResult> r) {
  const JobSpec& spec = slot.job->spec;
  LoadedModel& model = *slot.model;
  const std::vector<int32_t>& tokens = slot.prompt.tokens;
  JobResult& result = slot.result;
  if (r.ok()) {
    slot.answer->finish(spec.label);
    r->text = slot.answer->content();
    if (!spec.raw && (model.chat.reasoning || slot.harmony)) result.reasoning = slot.answer->reasoning();
    result.tool_calls = std::move(slot.answer->calls());
    if (!spec.tool_use.parallel && result.tool_calls.size() > 1) result.tool_calls.resize(1);
  }
  if (r.ok() && !r->next_logits.empty()) {
    model.cache->release(std::move(*slot.lease), tokens, r->next_logits);
    pool_.refresh_kv_prefixes(model);
  } else {
    model.cache->discard(std::move(*slot.lease));  // a failed or interrupted prefill leaves rows not worth keeping
  }
  slot.lease.reset();
  if (!r.ok()) return NodeError{ErrorCode::kInternal, "inference failed: " + r.status().message()};
  if (r->stop_reason == "cancelled") return cancellation(*slot.job);
  result.text = std::move(r->text);
  fill_generation_stats(spec, *r, result, options_.node_start);
  return std::move(result);
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
  begin_prefill(job.id, spec.tier, n_prompt, *max_tokens);
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
  begin_prefill(job.id, st.tier, total, 0);
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
      progress_[job.id].prompt_done = done;
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

void Executor::begin_prefill(uint64_t job_id, const std::string& tier, int prompt_tokens, int max_tokens) {
  MutexLock lock(mutex_);
  CurrentJob& c = progress_[job_id];
  c.tier = tier;
  c.phase = "prefill";
  c.prompt_tokens = prompt_tokens;
  c.max_tokens = max_tokens;
}

void Executor::finish(QueuedJob& job, Outcome<JobResult> outcome, Clock::time_point started) {
  bool idle = false;
  {
    MutexLock lock(mutex_);
    avg_job_s_ = 0.8 * avg_job_s_ + 0.2 * std::chrono::duration<double>(Clock::now() - started).count();
    std::erase_if(running_, [&](const std::shared_ptr<QueuedJob>& j) { return j.get() == &job; });
    progress_.erase(job.id);
    if (running_.empty()) batch_tier_ = nullptr;
    idle = running_.empty() && queue_.empty();
  }
  report(job, std::move(outcome));
  // A checkpoint a job left to write in the background is indexed (and
  // its prefixes published) once nothing else waits to run.
  if (idle) pool_.finish_kv_saves();
  wake_.notify_all();  // shutdown() may be waiting for the running jobs
  if (on_change_) on_change_();
}

void Executor::report(QueuedJob& job, Outcome<JobResult> outcome) {
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
    const int running = static_cast<int>(running_.size());
    a.position = first ? running : static_cast<int>(queue_.size()) + running;
    if (first) queue_.push_front(std::move(job));
    else queue_.push(std::move(job));
  }
  wake_.notify_all();
  return a;
}

std::shared_ptr<QueuedJob> Executor::take_queued(const std::function<bool(const JobSpec&)>& pick) {
  MutexLock lock(mutex_);
  if (stopping_) return nullptr;
  // With a slot free for it on a ready executor, the oldest job is not
  // waiting: this thread is about to start it (it may just not have been
  // scheduled yet), so moving it would only add a hop.
  const QueuedJob* starting_here = ready_ && next_job_fits() ? queue_.front().get() : nullptr;
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
      auto running = std::find_if(running_.begin(), running_.end(),
                                  [&](const std::shared_ptr<QueuedJob>& job) { return job->id == job_id; });
      if (running == running_.end()) return false;
      if (!(*running)->cancel.load()) {
        (*running)->cancel_reason = reason;
        (*running)->cancel.store(true);
      }
      return true;
    }
  }
  report(*removed, NodeError{ErrorCode::kCancelled, reason});
  return true;
}

void Executor::shutdown(std::chrono::milliseconds grace) {
  std::vector<std::shared_ptr<QueuedJob>> dropped;
  {
    MutexLock lock(mutex_);
    stopping_ = true;
    dropped = queue_.drain();
  }
  for (auto& job : dropped) report(*job, NodeError{ErrorCode::kCancelled, "the node is shutting down"});
  {
    MutexLock lock(mutex_);
    const auto deadline = Clock::now() + grace;
    while (!running_.empty() && wake_.wait_until(mutex_, deadline)) {
    }
    for (const std::shared_ptr<QueuedJob>& job : running_)
      if (!job->cancel.load()) {
        job->cancel_reason = "the node is shutting down";
        job->cancel.store(true);
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
  const Clock::time_point now = Clock::now();
  for (const std::shared_ptr<QueuedJob>& job : running_) {
    auto p = progress_.find(job->id);
    CurrentJob c = p != progress_.end() ? p->second : CurrentJob{};
    c.elapsed_ms = ms_between(job->spec.received, now);
    s.running.push_back(std::move(c));
  }
  if (!ready_)
    if (auto preload = progress_.find(0); preload != progress_.end()) s.running.push_back(preload->second);
  s.slots = slots_;
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
  // Jobs end about slots_ at a time.
  const double wait = avg_job_s_ * (static_cast<double>(queue_.size()) / std::max(1, slots_) + 1);
  return static_cast<int>(std::clamp(std::ceil(wait), 1.0, 300.0));
}

void log_job_run(const std::string& id, const JobStats& s) {
  char line[256];
  std::snprintf(line, sizeof line, "ran ticket %s exec %llu from %.3f ms to %.3f ms (%d tokens, %.1f tok/s)", id.c_str(),
                static_cast<unsigned long long>(s.exec_index), s.started_ms, s.finished_ms, s.generated_tokens, s.gen_tok_s);
  log_line("info", line);
}

}  // namespace revis::node
