// The executor in-process on a small real model: order, the queue bound,
// cancellation, errors, statistics, model loading and unloading, shutdown,
// and slots: jobs run together give each the result it gets alone.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "grammar/json_schema.h"
#include "node/executor.h"
#include "support/testdata.h"

namespace revis::node {
namespace {

using namespace std::chrono_literals;

std::string model_path(const std::string& stem) { return testing::testdata("models/" + stem + ".gguf").string(); }

// Collects each job's outcome; wait() blocks (bounded) until n have finished.
struct Outcomes {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::pair<std::string, Outcome<JobResult>>> done;
  std::map<std::string, std::string> streamed;

  // `pace` slows the stream down per piece of text: a job that must still be
  // running when the test acts cannot rely on the model being slow, since the
  // small test model fills its 512-token context in well under 100 ms.
  JobCallbacks callbacks(const std::string& label, std::chrono::milliseconds pace = 0ms) {
    JobCallbacks c;
    c.on_text = [this, label, pace](std::string_view t, std::span<const node::LogprobEntry>) {
      std::this_thread::sleep_for(pace);
      std::lock_guard<std::mutex> lock(mutex);
      streamed[label] += t;
    };
    c.on_finish = [this, label](Outcome<JobResult> o) {
      std::lock_guard<std::mutex> lock(mutex);
      done.emplace_back(label, std::move(o));
      cv.notify_all();
    };
    return c;
  }
  bool wait(size_t n, std::chrono::seconds limit = 60s) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, limit, [&] { return done.size() >= n; });
  }
  const Outcome<JobResult>& of(const std::string& label) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [l, o] : done)
      if (l == label) return o;
    throw std::runtime_error("no outcome for " + label);
  }
};

JobSpec spec(const std::string& label, int max_tokens, const std::string& tier = "small") {
  JobSpec s;
  s.source = "test";
  s.label = label;
  s.task = "test";
  s.tier = tier;
  s.messages = {{"system", "You are terse."}, {"user", "Say something about " + label}};
  s.max_tokens = max_tokens;
  s.sampling.temperature = 0;  // greedy: this model then never ends early
  return s;
}

// Waits (bounded) until the job with this label is the one running.
bool wait_running(const Executor& e, const std::string& label) {
  for (int i = 0; i < 1000; ++i) {
    const ExecutorSnapshot s = e.snapshot();
    for (const CurrentJob& job : s.running)
      if (job.label == label) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

struct Fixture {
  Metrics metrics;
  TierPool pool;
  Executor executor;
  explicit Fixture(size_t queue_limit = 8,
                   std::vector<TierSpec> tiers = {{.name = "small", .model_path = model_path("qwen2-Q8_0"), .ctx = 512,
                                                   .threads = 2, .slots = 1}},
                   uint64_t budget = 0)
      : pool(std::move(tiers), std::nullopt, budget),
        executor(pool, metrics, ExecutorOptions{.queue_limit = queue_limit,
                                                  .node_name = "test-node",
                                                  .catalog_digest = "sha256:cat",
                                                  .node_start = Clock::now(),
                                                  .sim = std::nullopt}) {}
};

TEST(Executor, RunsJobsOneAtATimeInArrivalOrder) {
  Fixture f;
  Outcomes out;
  f.executor.start("small");
  for (int i = 0; i < 4; ++i) {
    auto a = f.executor.submit(spec("j" + std::to_string(i), 6), out.callbacks("j" + std::to_string(i)));
    ASSERT_TRUE(a.ok()) << a.error().message;
  }
  ASSERT_TRUE(out.wait(4));
  double previous_finish = 0;
  for (int i = 0; i < 4; ++i) {
    const auto& [label, o] = out.done[static_cast<size_t>(i)];
    EXPECT_EQ(label, "j" + std::to_string(i));
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->stats.generated_tokens, 6);
    EXPECT_EQ(o->stop_reason, "length");
    EXPECT_GE(o->stats.started_ms, previous_finish) << "no overlap";
    previous_finish = o->stats.finished_ms;
    EXPECT_EQ(o->stats.exec_index, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(o->stats.node, "test-node");
    EXPECT_EQ(o->stats.catalog_digest, "sha256:cat");
    EXPECT_EQ(o->stats.model_digest.rfind("sha256:", 0), 0u);
    EXPECT_EQ(o->stats.chat_template, "default ChatML");
    EXPECT_GT(o->stats.prompt_tokens, 10);
    EXPECT_GT(o->stats.prefill_tok_s, 0);
    EXPECT_GE(o->stats.ttft_ms, o->stats.prefill_ms);
    EXPECT_EQ(out.streamed["j" + std::to_string(i)], o->text) << "the stream adds up to the text";
  }
  EXPECT_EQ((f.metrics.outcomes()[{"test", "done"}]), 4u);
  f.executor.shutdown(1s);
}

// Peers learn a node's busy/idle state from the observer: the end of the
// preload (busy loading -> idle) must reach it, not wait for a job.
TEST(Executor, ObserverHearsThatThePreloadEnded) {
  std::mutex mutex;  // declared before the executor, so they outlive its thread
  std::condition_variable cv;
  bool ready_seen = false;
  Fixture f;
  f.executor.set_observer([&] {
    const bool ready = f.executor.snapshot().ready;
    std::lock_guard<std::mutex> lock(mutex);
    ready_seen = ready_seen || ready;
    cv.notify_all();
  });
  f.executor.start("small");
  std::unique_lock<std::mutex> lock(mutex);
  EXPECT_TRUE(cv.wait_for(lock, 60s, [&] { return ready_seen; })) << "no change reported once the model was loaded";
  lock.unlock();
  f.executor.shutdown(1s);
}

TEST(Executor, QueueBoundAndCancellation) {
  Fixture f(/*queue_limit=*/2);
  Outcomes out;
  f.executor.start("small");
  // A long job, then two waiting: the third waiting one is refused.
  auto running = f.executor.submit(spec("long", 100000), out.callbacks("long", 5ms));
  ASSERT_TRUE(running.ok());
  // Wait until it is running, so the queue holds only what follows.
  ASSERT_TRUE(wait_running(f.executor, "long"));
  auto q1 = f.executor.submit(spec("q1", 4), out.callbacks("q1"));
  auto q2 = f.executor.submit(spec("q2", 4), out.callbacks("q2"));
  ASSERT_TRUE(q1.ok() && q2.ok());
  EXPECT_EQ(q1->position, 1);
  EXPECT_EQ(q2->position, 2);
  auto q3 = f.executor.submit(spec("q3", 4), out.callbacks("q3"));
  ASSERT_FALSE(q3.ok());
  EXPECT_EQ(q3.error().code, ErrorCode::kQueueFull);
  EXPECT_GE(f.executor.retry_after_seconds(), 1);

  // Cancelling a queued job finishes it at once, on this thread.
  EXPECT_TRUE(f.executor.cancel(q1->job_id, "changed my mind"));
  ASSERT_TRUE(out.wait(1, 1s));
  EXPECT_EQ(out.of("q1").error().code, ErrorCode::kCancelled);
  EXPECT_EQ(out.of("q1").error().message, "changed my mind");
  EXPECT_FALSE(f.executor.cancel(q1->job_id, "again")) << "already finished";

  // Cancelling the running job stops it within a token.
  EXPECT_TRUE(f.executor.cancel(running->job_id, "stop"));
  ASSERT_TRUE(out.wait(3));
  EXPECT_EQ(out.of("long").error().code, ErrorCode::kCancelled);
  ASSERT_TRUE(out.of("q2").ok()) << "the next job runs after a cancel";
  EXPECT_EQ((f.metrics.outcomes()[{"test", "cancelled"}]), 2u);
  f.executor.shutdown(1s);
}

TEST(Executor, TooLongAndModelUnavailable) {
  Fixture f(8, {{.name = "small", .model_path = model_path("qwen2-Q8_0"), .ctx = 64, .threads = 2},
                {.name = "broken", .model_path = "/nonexistent/model.gguf"}});
  Outcomes out;
  f.executor.start();
  JobSpec big = spec("big", 4);
  big.messages = {{"user", std::string(2000, 'x')}};
  ASSERT_TRUE(f.executor.submit(big, out.callbacks("big")).ok());
  ASSERT_TRUE(f.executor.submit(spec("broken", 4, "broken"), out.callbacks("broken")).ok());
  ASSERT_TRUE(f.executor.submit(spec("nowhere", 4, "nowhere"), out.callbacks("nowhere")).ok());
  JobSpec empty = spec("empty", 4);
  empty.raw = true;
  empty.prompt = "";
  ASSERT_TRUE(f.executor.submit(empty, out.callbacks("empty")).ok());
  JobSpec fits = spec("fits", 0);  // max_tokens 0: until the context is full
  ASSERT_TRUE(f.executor.submit(fits, out.callbacks("fits")).ok());
  ASSERT_TRUE(out.wait(5));
  EXPECT_EQ(out.of("big").error().code, ErrorCode::kTooLong);
  EXPECT_EQ(out.of("broken").error().code, ErrorCode::kModelUnavailable);
  EXPECT_NE(out.of("broken").error().message.find("/nonexistent/model.gguf"), std::string::npos);
  EXPECT_EQ(out.of("nowhere").error().code, ErrorCode::kModelUnavailable);
  EXPECT_EQ(out.of("empty").error().code, ErrorCode::kBadRequest);
  ASSERT_TRUE(out.of("fits").ok());
  EXPECT_EQ(out.of("fits").value().stop_reason, "length");
  EXPECT_EQ(out.of("fits").value().stats.prompt_tokens + out.of("fits").value().stats.generated_tokens, 64);
  f.executor.shutdown(1s);
}

// One prompt three ways: on tier "plain", on tier "drafted" and on "plain"
// with prompt lookup.
void submit_plain_drafted_lookup(Fixture& f, Outcomes& out, int max_tokens) {
  JobSpec lookup = spec("same", max_tokens, "plain");
  lookup.lookup = true;
  ASSERT_TRUE(f.executor.submit(spec("same", max_tokens, "plain"), out.callbacks("plain")).ok());
  ASSERT_TRUE(f.executor.submit(spec("same", max_tokens, "drafted"), out.callbacks("drafted")).ok());
  ASSERT_TRUE(f.executor.submit(lookup, out.callbacks("lookup")).ok());
}

// The jobs of `labels` gave the text of the job "plain", with drafts.
void expect_plain_text_drafted(Outcomes& out, std::initializer_list<const char*> labels) {
  for (const char* label : labels) {
    const auto& o = out.of(label);
    ASSERT_TRUE(o.ok()) << label << ": " << o.error().message;
    EXPECT_EQ(o->text, out.of("plain").value().text) << label;
    EXPECT_GT(o->stats.draft_tokens, 0) << label;
    EXPECT_LE(o->stats.accepted_tokens, o->stats.draft_tokens) << label;
    std::printf("%s: drafted %d accepted %d\n", label, o->stats.draft_tokens, o->stats.accepted_tokens);
  }
}

// Speculative decoding: a tier's draft model, and prompt lookup asked by a
// job (a catalogue task), give the text plain decoding gives, and the stats
// count the drafts; a draft of another vocabulary makes the tier unavailable.
TEST(Executor, SpeculativeTiersKeepTheTextAndReportDrafts) {
  const std::string target = model_path("llama-bpe-Q8_0");
  Fixture f(8, {{.name = "plain", .model_path = target, .ctx = 512, .threads = 2},
                {.name = "drafted", .model_path = target, .ctx = 512, .threads = 2,
                 .draft_path = model_path("llama-bpe-Q4_0")},
                {.name = "wrong", .model_path = target, .ctx = 512, .threads = 2,
                 .draft_path = model_path("llama-spm-Q4_0")}});
  Outcomes out;
  f.executor.start();
  submit_plain_drafted_lookup(f, out, 24);
  ASSERT_TRUE(f.executor.submit(spec("same", 4, "wrong"), out.callbacks("wrong")).ok());
  ASSERT_TRUE(out.wait(4));
  ASSERT_TRUE(out.of("plain").ok()) << out.of("plain").error().message;
  EXPECT_EQ(out.of("plain").value().stats.draft_tokens, 0);
  expect_plain_text_drafted(out, {"drafted", "lookup"});
  EXPECT_EQ(out.of("wrong").error().code, ErrorCode::kModelUnavailable);
  EXPECT_NE(out.of("wrong").error().message.find("vocabulary"), std::string::npos) << out.of("wrong").error().message;
  f.executor.shutdown(1s);
}

// The same on a hybrid (qwen35): the slots take rejected drafts back
// through the recurrent states they keep. The target drafting for itself
// has every draft accepted; prompt lookup on its text has some rejected.
TEST(Executor, HybridTiersDraftToo) {
  const std::string target = REVIS_REPO_TESTDATA_DIR "qwen35/models/qwen35-Q8_0.gguf";
  Fixture f(8, {{.name = "plain", .model_path = target, .ctx = 512, .threads = 2},
                {.name = "drafted", .model_path = target, .ctx = 512, .threads = 2, .draft_path = target}});
  Outcomes out;
  f.executor.start();
  submit_plain_drafted_lookup(f, out, 48);
  ASSERT_TRUE(out.wait(3));
  ASSERT_TRUE(out.of("plain").ok()) << out.of("plain").error().message;
  expect_plain_text_drafted(out, {"drafted", "lookup"});
  EXPECT_EQ(out.of("drafted").value().stats.accepted_tokens, out.of("drafted").value().stats.draft_tokens);
  EXPECT_LT(out.of("lookup").value().stats.accepted_tokens, out.of("lookup").value().stats.draft_tokens);
  f.executor.shutdown(1s);
}

TEST(Executor, LoadsTiersOnDemandAndUnloadsLeastRecentlyUsed) {
  // A budget that holds one model at a time.
  Fixture f(8,
            {{.name = "a", .model_path = model_path("qwen2-Q8_0"), .ctx = 256, .threads = 2},
             {.name = "b", .model_path = model_path("llama-spm-Q8_0"), .ctx = 256, .threads = 2},
             {.name = "a2", .model_path = model_path("qwen2-Q8_0"), .ctx = 256, .threads = 2}},
            /*budget=*/4u << 20);
  Outcomes out;
  f.executor.start();
  EXPECT_EQ(f.pool.loaded_count(), 0) << "nothing loads before it is needed";
  ASSERT_TRUE(f.executor.submit(spec("a", 3, "a"), out.callbacks("a")).ok());
  ASSERT_TRUE(out.wait(1));
  EXPECT_EQ(f.pool.loaded_count(), 1);
  EXPECT_GT(out.of("a").value().stats.load_ms, 0);
  ASSERT_TRUE(f.executor.submit(spec("a2", 3, "a2"), out.callbacks("a2")).ok());
  ASSERT_TRUE(out.wait(2));
  EXPECT_EQ(out.of("a2").value().stats.load_ms, 0) << "same file and settings share the loaded model";
  ASSERT_TRUE(f.executor.submit(spec("b", 3, "b"), out.callbacks("b")).ok());
  ASSERT_TRUE(out.wait(3));
  ASSERT_TRUE(out.of("b").ok()) << out.of("b").error().message;
  EXPECT_EQ(f.pool.loaded_count(), 1) << "a was unloaded to fit b";
  EXPECT_EQ(f.pool.loads(), 2u);
  for (const TierStatus& t : f.pool.status()) EXPECT_EQ(t.loaded, t.name == "b") << t.name;
  EXPECT_EQ(out.of("b").value().stats.chat_template, "default ChatML") << "no template in the file: ChatML fallback";
  f.executor.shutdown(1s);
}

TEST(Executor, ShutdownCancelsQueuedJobsAndRefusesNewOnes) {
  Fixture f;
  Outcomes out;
  f.executor.start("small");
  ASSERT_TRUE(f.executor.submit(spec("long", 100000), out.callbacks("long", 5ms)).ok());
  ASSERT_TRUE(f.executor.submit(spec("waiting", 4), out.callbacks("waiting")).ok());
  ASSERT_TRUE(wait_running(f.executor, "long"));
  const auto start = Clock::now();
  f.executor.shutdown(100ms);
  EXPECT_LT(Clock::now() - start, 10s);
  ASSERT_TRUE(out.wait(2, 1s));
  EXPECT_EQ(out.of("waiting").error().code, ErrorCode::kCancelled);
  EXPECT_EQ(out.of("long").error().code, ErrorCode::kCancelled);
  auto late = f.executor.submit(spec("late", 4), out.callbacks("late"));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, ErrorCode::kCancelled);
}

}  // namespace
}  // namespace revis::node

namespace revis::node {
namespace {

// Jobs that differ in everything a slot keeps to itself: prompt, length,
// seed and temperature, logprobs, stop strings, a JSON schema.
std::vector<JobSpec> mixed_jobs(int n) {
  std::vector<JobSpec> jobs;
  for (int i = 0; i < n; ++i) {
    JobSpec s = spec("m" + std::to_string(i), 12 + 3 * (i % 5), "slots");
    s.messages = {{"user", "Tell story number " + std::to_string(i) + " about " + std::string(1 + i % 4, 'a' + i % 26)}};
    s.sampling.temperature = i % 3 == 0 ? 0.0f : 0.9f;
    s.sampling.seed = 1000 + static_cast<uint64_t>(i);
    s.logprobs = i % 2 == 0;
    s.top_logprobs = i % 4 == 0 ? 3 : 0;
    if (i % 5 == 1) s.stop = {"e", "a"};
    if (i % 6 == 2) {
      auto grammar = compile_json_schema_text(R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})");
      EXPECT_TRUE(grammar.ok()) << grammar.status().message();
      s.grammar = *grammar;
    }
    jobs.push_back(std::move(s));
  }
  return jobs;
}

// Runs `jobs` on a node whose tier has `slots` slots: label -> outcome, and
// the most jobs seen running at once.
std::pair<std::map<std::string, Outcome<JobResult>>, int> run_with_slots(const std::vector<JobSpec>& jobs, int slots,
                                                                          std::vector<std::string> cancel = {}) {
  Fixture f(64, {{.name = "slots", .model_path = model_path("llama-bpe-Q8_0"), .ctx = 512, .threads = 2, .slots = slots}});
  Outcomes out;
  f.executor.start("slots");
  std::map<std::string, uint64_t> ids;
  for (const JobSpec& job : jobs) {
    auto a = f.executor.submit(job, out.callbacks(job.label, job.label == "slow" ? 5ms : 0ms));
    EXPECT_TRUE(a.ok()) << a.error().message;
    ids[job.label] = a->job_id;
  }
  int most = 0;
  for (const std::string& label : cancel) {
    EXPECT_TRUE(wait_running(f.executor, label));
    most = std::max(most, static_cast<int>(f.executor.snapshot().running.size()));
    f.executor.cancel(ids[label], "cancelled by the test");
  }
  while (!out.wait(jobs.size(), 0s)) {
    most = std::max(most, static_cast<int>(f.executor.snapshot().running.size()));
    std::this_thread::sleep_for(1ms);
  }
  std::map<std::string, Outcome<JobResult>> results;
  for (auto& [label, o] : out.done) {
    if (o.ok()) EXPECT_EQ(out.streamed[label], o->text) << label << ": the stream adds up to the text";
    results.emplace(label, std::move(o));
  }
  EXPECT_LE(most, slots);
  EXPECT_EQ(f.executor.snapshot().slots, slots);
  f.executor.shutdown(1s);
  return {std::move(results), most};
}

void expect_same(const JobResult& alone, const JobResult& batched, const std::string& label) {
  EXPECT_EQ(batched.text, alone.text) << label;
  EXPECT_EQ(batched.stop_reason, alone.stop_reason) << label;
  EXPECT_EQ(batched.stop_sequence, alone.stop_sequence) << label;
  EXPECT_EQ(batched.stats.generated_tokens, alone.stats.generated_tokens) << label;
  ASSERT_EQ(batched.logprobs.size(), alone.logprobs.size()) << label;
  for (size_t t = 0; t < alone.logprobs.size(); ++t) {
    EXPECT_EQ(batched.logprobs[t].chosen.token, alone.logprobs[t].chosen.token) << label << " token " << t;
    EXPECT_EQ(batched.logprobs[t].chosen.logprob, alone.logprobs[t].chosen.logprob) << label << " token " << t << ": bit for bit";
    ASSERT_EQ(batched.logprobs[t].top.size(), alone.logprobs[t].top.size()) << label;
    for (size_t k = 0; k < alone.logprobs[t].top.size(); ++k)
      EXPECT_EQ(batched.logprobs[t].top[k].logprob, alone.logprobs[t].top[k].logprob) << label << " token " << t;
  }
}

// 3N jobs on N slots: every job finishes once, with the text, stop and
// logprobs (bit for bit) it gets on a one-slot node, whatever ran beside it.
TEST(ExecutorSlots, JobsInABatchGetWhatTheyGetAlone) {
  const std::vector<JobSpec> jobs = mixed_jobs(12);
  auto [alone, one_at_a_time] = run_with_slots(jobs, 1);
  auto [batched, together] = run_with_slots(jobs, 4);
  EXPECT_EQ(one_at_a_time, 1);
  EXPECT_GE(together, 2) << "the jobs never shared a forward pass";
  ASSERT_EQ(batched.size(), jobs.size()) << "every job finishes once";
  for (const JobSpec& job : jobs) {
    const auto& a = alone.at(job.label);
    const auto& b = batched.at(job.label);
    ASSERT_TRUE(a.ok()) << job.label << ": " << a.error().message;
    ASSERT_TRUE(b.ok()) << job.label << ": " << b.error().message;
    expect_same(*a, *b, job.label);
    if (job.grammar) EXPECT_EQ(b->text.rfind("{", 0), 0u) << job.label << ": its schema stays with it: " << b->text;
    if (!job.logprobs) EXPECT_TRUE(b->logprobs.empty()) << job.label << ": no logprobs leak in";
  }
}

// A job cancelled mid-batch ends alone; the others' results do not change.
TEST(ExecutorSlots, ACancelledSlotLeavesTheOthersExact) {
  std::vector<JobSpec> jobs = mixed_jobs(5);
  JobSpec slow = spec("slow", 100000, "slots");
  jobs.insert(jobs.begin() + 1, slow);
  auto [alone, _] = run_with_slots(mixed_jobs(5), 1);
  auto [batched, together] = run_with_slots(jobs, 3, {"slow"});
  ASSERT_EQ(batched.size(), jobs.size());
  EXPECT_GE(together, 2);
  EXPECT_EQ(batched.at("slow").error().code, ErrorCode::kCancelled);
  for (const auto& [label, a] : alone) {
    ASSERT_TRUE(batched.at(label).ok()) << label << ": " << batched.at(label).error().message;
    expect_same(*a, *batched.at(label), label);
  }
}

// A tier with a draft model: slots that run together each draft with a
// copy of their own (Drafter::another), and their texts are those of a
// one-slot node. The draft is the target itself, so every slot's drafts
// are accepted and counted.
TEST(ExecutorSlots, EverySlotDraftsAtOnce) {
  const std::string model = model_path("llama-bpe-Q8_0");
  auto run = [&](int slots) {
    Fixture f(8, {{.name = "d", .model_path = model, .ctx = 512, .threads = 2, .draft_path = model, .slots = slots}});
    Outcomes out;
    f.executor.start("d");
    for (int i = 0; i < 3; ++i) {
      JobSpec s = spec("j" + std::to_string(i), 24, "d");
      s.messages = {{"user", "Count to " + std::to_string(10 + i)}};
      s.sampling.temperature = 0.0f;
      EXPECT_TRUE(f.executor.submit(s, out.callbacks(s.label)).ok());
    }
    int most = 0;
    while (!out.wait(3, 0s)) {
      most = std::max(most, static_cast<int>(f.executor.snapshot().running.size()));
      std::this_thread::sleep_for(1ms);
    }
    f.executor.shutdown(1s);
    std::map<std::string, Outcome<JobResult>> results(std::make_move_iterator(out.done.begin()),
                                                      std::make_move_iterator(out.done.end()));
    return std::pair{std::move(results), most};
  };
  auto [alone, one] = run(1);
  auto [together, most] = run(3);
  EXPECT_EQ(one, 1);
  EXPECT_GE(most, 2) << "the jobs never ran at once";
  for (auto& [label, outcome] : together) {
    ASSERT_TRUE(outcome.ok()) << label << ": " << outcome.error().message;
    EXPECT_GT(outcome->stats.draft_tokens, 0) << label << " did not draft";
    EXPECT_EQ(outcome->stats.accepted_tokens, outcome->stats.draft_tokens) << label << ": the target drafts itself";
    expect_same(*alone.at(label), *outcome, label);
  }
}

// The slots a tier gets: its own setting, else what the memory budget
// holds beside the model (at least 1, at most kDefaultSlotsMax).
TEST(ExecutorSlots, TheBudgetDecidesTheDefault) {
  for (auto [budget, expected] : {std::pair<uint64_t, int>{0, kDefaultSlotsMax}, {1, 1}}) {
    TierPool pool({{.name = "t", .model_path = model_path("qwen2-Q8_0"), .ctx = 512, .threads = 2}}, std::nullopt, budget);
    auto model = pool.acquire(*pool.resolve("t"));
    ASSERT_TRUE(model.ok()) << model.status().message();
    EXPECT_EQ((*model)->slots, expected) << "budget " << budget;
    EXPECT_EQ((*model)->slot_kv_bytes, (*model)->engine->info().kv_bytes_per_token * 512u);
    EXPECT_GE((*model)->footprint_bytes, (*model)->slot_kv_bytes * static_cast<uint64_t>(expected));
  }
}

// A draft model's session is copied into every slot that drafts, so a
// slot's memory counts it beside the target's cache.
TEST(ExecutorSlots, ASlotCountsItsDraftModelsSession) {
  const std::string path = model_path("qwen2-Q8_0");
  TierPool pool({{.name = "t", .model_path = path, .ctx = 512, .threads = 2, .draft_path = path}}, std::nullopt, 0);
  auto model = pool.acquire(*pool.resolve("t"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  ASSERT_TRUE((*model)->draft_model);
  const uint64_t target = (*model)->engine->info().kv_bytes_per_token * 512u;
  EXPECT_EQ((*model)->draft_model->state_bytes(), target) << "the draft is the target's file at the same context";
  EXPECT_EQ((*model)->slot_kv_bytes, 2 * target);
}

// Only a hybrid keeps a state per draft token; a sliding-window model's
// rings, state too, go back by themselves, so a drafting tier of one
// counts its cache and rings once per slot.
TEST(ExecutorSlots, OnlyAHybridCountsAStatePerDraftToken) {
  for (const char* file : {"gemma3/models/gemma3-Q8_0.gguf", "qwen35/models/qwen35-Q8_0.gguf"}) {
    SCOPED_TRACE(file);
    const std::string path = std::string(REVIS_REPO_TESTDATA_DIR) + file;
    TierPool pool({{.name = "t", .model_path = path, .ctx = 512, .threads = 2, .lookup = true}}, std::nullopt, 0);
    auto model = pool.acquire(*pool.resolve("t"));
    ASSERT_TRUE(model.ok()) << model.status().message();
    const ModelInfo& info = (*model)->engine->info();
    ASSERT_GT(info.recurrent_state_bytes, 0u);
    const bool hybrid = std::string(file).find("qwen35") != std::string::npos;
    EXPECT_EQ(info.draft_state_bytes, hybrid ? info.recurrent_state_bytes : 0u);
    EXPECT_EQ((*model)->slot_kv_bytes, info.kv_bytes_per_token * 512u + info.session_state_bytes +
                                           (kDefaultDraftMax + 1) * info.draft_state_bytes);
  }
}

}  // namespace
}  // namespace revis::node
