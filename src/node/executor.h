// The executor: one thread, one forward pass at a time, carrying every job
// that fits in the model's slots; everything else waits in a bounded FIFO.
//
// Inference is memory-bandwidth bound: two forward passes at once would
// each read all the weights and run at about half speed. A batch reads them
// once for all its rows, so the executor runs the jobs of one tier
// together, up to its slots (TierSpec::slots), as a GenerationBatch: a
// job joins at the next step, its prompt goes in chunks between the other
// slots' decoding steps (at most step_tokens tokens a pass), and it leaves
// when it ends, freeing its slot. A job for another tier waits until the
// batch drains (jobs start in arrival order). Embeddings and the simulated
// engine run alone, one job at a time.
//
// For each job the executor resolves the tier, loads its model if needed
// (TierPool), renders the prompt with the model's chat template, checks it
// fits the context (too_long), runs the cancellable generation, and
// reports through the job's callbacks: on_text while streaming, then exactly
// one on_finish with the result and its statistics, or an error. A job's
// tokens do not depend on the jobs beside it (revis/engine.h: batch
// invariance). With the simulated engine (options.sim) no model is
// involved: the prompt's size is estimated and sim_inference.h stands in
// for the generation loop.
//
// Thread-safety: submit, cancel, snapshot and shutdown may be called from
// any thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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
  int step_tokens = 256;                // tokens one forward pass carries at most
};

struct Admission {
  uint64_t job_id = 0;
  int position = 0;  // jobs ahead of this one, the running one included
};

struct CurrentJob {
  uint64_t job_id = 0;
  std::string source, label, task, tier;
  std::string phase;  // "loading", "prefill", "generating"
  int prompt_tokens = 0, prompt_done = 0, generated = 0, max_tokens = 0;
  double elapsed_ms = 0;
};

struct ExecutorSnapshot {
  bool ready = false;     // the startup model is loaded (or there was none to load)
  bool stopping = false;
  std::string preload_error;
  std::vector<CurrentJob> running;  // oldest first; while loading the startup model, its tier alone
  int slots = 1;                    // of the model running now, or the last one loaded
  int queue_length = 0;
  int queue_limit = 0;
  uint64_t executed = 0;  // jobs the executor has started

  // Jobs in the batch (none before ready: the startup model is loading).
  int running_jobs() const { return ready ? static_cast<int>(running.size()) : 0; }
  int free_slots() const { return ready ? std::max(0, slots - running_jobs()) : 0; }
  // No slot free, or jobs waiting: a new job would wait.
  bool busy() const { return free_slots() == 0 || queue_length > 0; }
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
  // finishing it (no callback runs): the fabric moves it to a peer with a
  // free slot. A job about to start (first in line, with a slot free for
  // it) is never taken.
  std::shared_ptr<QueuedJob> take_queued(const std::function<bool(const JobSpec&)>& pick);
  // Called on the executor thread, outside any lock, once it is ready (after
  // the preload, if any) and whenever a job starts or ends (free slots are
  // pushed to peers). Set before start().
  void set_observer(std::function<void()> on_change) { on_change_ = std::move(on_change); }
  // Cancels a queued job (its on_finish runs now, on this thread) or the
  // running one (the inference stops before its next token). False when the
  // job is not queued or running (already finished, or unknown). The other
  // slots run on unchanged.
  bool cancel(uint64_t job_id, const std::string& reason);

  // Stops accepting jobs and cancels the queued ones; lets the running jobs
  // finish for up to `grace`, then cancels them; joins the thread.
  void shutdown(std::chrono::milliseconds grace);

  ExecutorSnapshot snapshot() const;
  bool ready() const;
  // A guess at how long a new job would wait, for HTTP Retry-After.
  int retry_after_seconds() const;

 private:
  struct Slot;  // a job in the batch (executor.cpp)
  void loop(std::optional<std::string> preload_tier, std::function<void(const Status&)> on_preloaded);
  // Whether the oldest queued job may start now: a slot is free, and the
  // batch is empty or runs its tier.
  bool next_job_fits() const REQUIRES(mutex_);
  // Starts a job taken from the queue: in the batch, or alone to its end.
  void admit(const std::shared_ptr<QueuedJob>& job);
  // A job that runs alone (embeddings, the simulated engine), to its end.
  void run_alone(QueuedJob& job);
  Outcome<JobResult> execute_alone(QueuedJob& job);
  // The job's statistics before it runs; its error if it was cancelled.
  JobResult begin_job(const QueuedJob& job) EXCLUDES(mutex_);
  // A generation of a loaded model, prepared to join the batch.
  Outcome<std::unique_ptr<Slot>> prepare(const std::shared_ptr<QueuedJob>& job);
  // Its generation ended: the answer read back, the session returned to the
  // model's prefix cache, the job finished.
  void complete(Slot& slot, Result<GenerateResult> generated);
  Outcome<JobResult> completed(Slot& slot, Result<GenerateResult> generated);
  // The error of a job whose cancel flag is set.
  NodeError cancellation(const QueuedJob& job) const EXCLUDES(mutex_);
  // The job's tier, loaded; fills the tier and model fields of `stats`.
  struct TierModel {
    const TierSpec* tier;
    LoadedModel* model;
  };
  Outcome<TierModel> load_model(const JobSpec& spec, JobStats& stats);
  // An embeddings job (JobSpec::embed), in place of a generation.
  Outcome<JobResult> embed(QueuedJob& job, JobResult result);
  Outcome<GenerateResult> infer_simulated(QueuedJob& job, JobResult& result, GenerateOptions& options);
  // Per-job progress for snapshot().
  std::function<void(int, int)> progress_of(uint64_t job_id);
  void begin_prefill(uint64_t job_id, const std::string& tier, int prompt_tokens, int max_tokens);
  // Reports the outcome and frees the job's slot.
  void finish(QueuedJob& job, Outcome<JobResult> outcome, Clock::time_point started);
  void report(QueuedJob& job, Outcome<JobResult> outcome);

  TierPool& pool_;
  Metrics& metrics_;
  ExecutorOptions options_;

  mutable Mutex mutex_;
  CondVar wake_;
  JobQueue queue_ GUARDED_BY(mutex_);
  std::vector<std::shared_ptr<QueuedJob>> running_ GUARDED_BY(mutex_);  // oldest first
  std::map<uint64_t, CurrentJob> progress_ GUARDED_BY(mutex_);          // of the running jobs, and the preload (id 0)
  int slots_ GUARDED_BY(mutex_) = 1;
  const TierSpec* batch_tier_ GUARDED_BY(mutex_) = nullptr;  // the tier the running jobs share
  bool ready_ GUARDED_BY(mutex_) = false;
  bool stopping_ GUARDED_BY(mutex_) = false;
  bool stop_thread_ GUARDED_BY(mutex_) = false;
  std::string preload_error_ GUARDED_BY(mutex_);
  uint64_t next_id_ GUARDED_BY(mutex_) = 1;
  uint64_t executed_ GUARDED_BY(mutex_) = 0;
  double avg_job_s_ GUARDED_BY(mutex_) = 1.0;  // moving average of job durations
  std::function<void()> on_change_;
  // The executor thread's own: the batch and the jobs in it.
  std::unique_ptr<GenerationBatch> batch_;
  LoadedModel* batch_model_ = nullptr;
  std::vector<std::unique_ptr<Slot>> slots_in_use_;
  std::thread thread_;
};

// "ran ticket ID exec N from S ms to F ms (...)", for every job a node ran
// to the end: the cluster tests read these lines to check that a
// one-slot node never ran two jobs at once.
void log_job_run(const std::string& id, const JobStats& stats);

}  // namespace revis::node
