// The executor: one thread, one inference at a time, everything else waits
// in a bounded FIFO.
//
// Inference is memory-bandwidth bound: two at once would each run at about
// half speed and finish no sooner in total, so a node runs exactly one and
// lets the queue (and the dispatcher, via queue_full) absorb bursts. Jobs
// run strictly in arrival order.
//
// For each job the executor resolves the tier, loads its model if needed
// (TierPool), renders the prompt with the model's chat template, checks it
// fits the context (too_long), runs the cancellable generation loop, and
// reports through the job's callbacks: on_text while streaming, then exactly
// one on_finish with the result and its statistics, or an error. With the
// simulated engine (options.sim) no model is involved: the prompt's size is
// estimated and sim_inference.h stands in for the generation loop.
//
// Thread-safety: submit, cancel, snapshot and shutdown may be called from
// any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "node/job_queue.h"
#include "node/metrics.h"
#include "node/sim_inference.h"
#include "node/tier_pool.h"
#include "protocol/errors.h"
#include "protocol/job.h"
#include "revis/generate.h"

namespace revis::node {

struct ExecutorOptions {
  size_t queue_limit = 64;
  std::string node_name;
  std::string catalog_digest;
  Clock::time_point node_start = Clock::now();
  std::optional<SimEngineOptions> sim;  // set: the simulated engine runs every job
};

struct Admission {
  uint64_t job_id = 0;
  int position = 0;  // jobs ahead of this one, the running one included
};

struct CurrentJob {
  std::string source, label, task, tier;
  std::string phase;  // "loading", "prefill", "generating"
  int prompt_tokens = 0, prompt_done = 0, generated = 0, max_tokens = 0;
  double elapsed_ms = 0;
};

struct ExecutorSnapshot {
  bool ready = false;     // the startup model is loaded (or there was none to load)
  bool stopping = false;
  std::string preload_error;
  std::optional<CurrentJob> current;
  int queue_length = 0;
  int queue_limit = 0;
  uint64_t executed = 0;  // jobs the executor has started
};

class Executor {
 public:
  Executor(TierPool& pool, Metrics& metrics, ExecutorOptions options);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Starts the thread. With preload_tier it first loads that tier's model
  // (ready() stays false until then) and reports the outcome to on_preloaded
  // (on the executor thread).
  void start(std::optional<std::string> preload_tier = std::nullopt,
             std::function<void(const Status&)> on_preloaded = nullptr);

  // Queues a job: queue_full when the queue is at its limit, cancelled once
  // shutdown has begun. After success, callbacks.on_finish is called exactly
  // once, later. `first`: a job accepted earlier that comes back (its run on
  // another node failed) goes to the head of the queue, limit or not.
  Outcome<Admission> submit(JobSpec spec, JobCallbacks callbacks, bool first = false);
  // Takes the oldest queued job that `pick` accepts out of the queue without
  // finishing it (no callback runs): the fabric moves it to an idle peer.
  // A job about to start (first in line, nothing running) is never taken.
  std::shared_ptr<QueuedJob> take_queued(const std::function<bool(const JobSpec&)>& pick);
  // Called on the executor thread, outside any lock, once it is ready (after
  // the preload, if any) and whenever a job starts or ends (busy/idle
  // changes are pushed to peers). Set before start().
  void set_observer(std::function<void()> on_change) { on_change_ = std::move(on_change); }
  // Cancels a queued job (its on_finish runs now, on this thread) or the
  // running one (the inference stops before its next token). False when the
  // job is not queued or running (already finished, or unknown).
  bool cancel(uint64_t job_id, const std::string& reason);

  // Stops accepting jobs and cancels the queued ones; lets the running job
  // finish for up to `grace`, then cancels it; joins the thread.
  void shutdown(std::chrono::milliseconds grace);

  ExecutorSnapshot snapshot() const;
  bool ready() const;
  // A guess at how long a new job would wait, for HTTP Retry-After.
  int retry_after_seconds() const;

 private:
  void loop(std::optional<std::string> preload_tier, std::function<void(const Status&)> on_preloaded);
  void run(QueuedJob& job);
  Outcome<JobResult> execute(QueuedJob& job);
  // The error of a job whose cancel flag is set.
  NodeError cancellation(const QueuedJob& job) const EXCLUDES(mutex_);
  // The engine-specific half of execute(): fills the tier and model fields
  // of `stats`, sets options.max_tokens and runs the generation.
  // Both fill result.stats' model fields, and the model one result.logprobs
  // and, for a thinking template, result.reasoning (the text is the answer).
  Outcome<GenerateResult> infer_with_model(QueuedJob& job, JobResult& result, GenerateOptions& options);
  // The job's tier, loaded; fills the tier and model fields of `stats`.
  struct TierModel {
    const TierSpec* tier;
    LoadedModel* model;
  };
  Outcome<TierModel> load_model(const JobSpec& spec, JobStats& stats);
  // An embeddings job (JobSpec::embed), in place of a generation.
  Outcome<JobResult> embed(QueuedJob& job, JobResult result);
  Outcome<GenerateResult> infer_simulated(QueuedJob& job, JobResult& result, GenerateOptions& options);
  void begin_prefill(const std::string& tier, int prompt_tokens, int max_tokens);
  void finish(QueuedJob& job, Outcome<JobResult> outcome);

  TierPool& pool_;
  Metrics& metrics_;
  ExecutorOptions options_;

  mutable Mutex mutex_;
  CondVar wake_;
  JobQueue queue_ GUARDED_BY(mutex_);
  std::shared_ptr<QueuedJob> running_ GUARDED_BY(mutex_);
  CurrentJob current_ GUARDED_BY(mutex_);
  bool ready_ GUARDED_BY(mutex_) = false;
  bool stopping_ GUARDED_BY(mutex_) = false;
  bool stop_thread_ GUARDED_BY(mutex_) = false;
  std::string preload_error_ GUARDED_BY(mutex_);
  uint64_t next_id_ GUARDED_BY(mutex_) = 1;
  uint64_t executed_ GUARDED_BY(mutex_) = 0;
  double avg_job_s_ GUARDED_BY(mutex_) = 1.0;  // moving average of job durations
  std::function<void()> on_change_;
  std::thread thread_;
};

// "ran ticket ID exec N from S ms to F ms (...)", for every job a node ran
// to the end: the cluster tests read these lines to check that no node ever
// ran two jobs at once.
void log_job_run(const std::string& id, const JobStats& stats);

}  // namespace revis::node
