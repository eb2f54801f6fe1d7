// The generation loop (include/revis/generate.h) on a small real model:
// stop strings and streaming, cancellation in the prefill and in decoding,
// progress, chunked prefill, the constraint hook, logit bias and logprobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "revis/engine.h"
#include "revis/generate.h"
#include "support/testdata.h"

namespace revis {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::unique_ptr<Engine> load() {
  auto engine = Engine::load(
      {.model_path = testing::testdata("models/qwen2-Q8_0.gguf").string(), .n_ctx = 512, .n_threads = 2});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Token ids spread over the vocabulary; the model does not care what they say.
std::vector<int32_t> spread_tokens(const Engine& engine, int n) {
  std::vector<int32_t> t(n);
  uint32_t x = 2463534242u;
  for (int32_t& id : t) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    id = static_cast<int32_t>(x % engine.info().n_vocab);
  }
  return t;
}

GenerateOptions greedy(int max_tokens) {
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.sampling.temperature = 0;
  return o;
}

std::vector<double> log_softmax(std::span<const float> logits) {
  double max = -INFINITY;
  for (float l : logits) max = std::max<double>(max, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(l - max);
  std::vector<double> out;
  for (float l : logits) out.push_back(l - max - std::log(sum));
  return out;
}

class Generate : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = load();
    ASSERT_TRUE(engine_);
    session_ = engine_->new_session();
    prompt_ = engine_->tokenize("Hello world", false, false);
  }
  Result<GenerateResult> run(const GenerateOptions& o, const TextSink& on_text = nullptr) {
    return generate(*engine_, *session_, prompt_, o, on_text);
  }
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Session> session_;
  std::vector<int32_t> prompt_;
};

TEST_F(Generate, StopsAtStopStringsAndStreamsWholeCharacters) {
  std::string streamed;
  GenerateOptions o = greedy(40);
  o.ignore_eog = true;
  auto full = run(o, [&](std::string_view t) { streamed += t; });
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_EQ(streamed, full->text);
  EXPECT_EQ(full->stop_reason, "length");
  EXPECT_EQ(full->generated.size(), 40u);
  ASSERT_GE(full->text.size(), 4u);
  // Stop at whatever the model wrote third: the text ends just before it.
  o.stop = {full->text.substr(2, 2)};
  auto stopped = run(o);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->stop_reason, "stop");
  EXPECT_EQ(full->text.rfind(stopped->text, 0), 0u);
  EXPECT_LT(stopped->text.size(), full->text.size());
}

TEST_F(Generate, CancelsDuringThePrefillBetweenChunks) {
  prompt_ = spread_tokens(*engine_, 200);
  std::atomic<bool> cancel{false};
  std::vector<int> prompt_done;
  GenerateOptions o = greedy(10);
  o.prefill_chunk = 64;
  o.cancel = &cancel;
  o.on_progress = [&](int done, int generated) {
    EXPECT_EQ(generated, 0);
    prompt_done.push_back(done);
    cancel.store(true);
  };
  auto r = run(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->stop_reason, "cancelled");
  EXPECT_TRUE(r->generated.empty());
  EXPECT_TRUE(r->next_logits.empty());
  EXPECT_EQ(prompt_done, std::vector<int>{64});
  EXPECT_EQ(session_->n_past(), 64);  // the second chunk never ran
}

TEST_F(Generate, CancelsBeforeTheNextDecodingStep) {
  std::atomic<bool> cancel{false};
  GenerateOptions o = greedy(100);
  o.ignore_eog = true;
  o.cancel = &cancel;
  o.on_progress = [&](int, int generated) {
    if (generated == 3) cancel.store(true);
  };
  auto r = run(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop_reason, "cancelled");
  EXPECT_EQ(r->generated.size(), 3u);
  cancel.store(true);
  auto none = run(o);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->stop_reason, "cancelled");
  EXPECT_TRUE(none->generated.empty());
}

TEST_F(Generate, ReportsProgressPerChunkAndPerToken) {
  prompt_ = spread_tokens(*engine_, 150);
  std::vector<std::pair<int, int>> seen;
  GenerateOptions o = greedy(3);
  o.ignore_eog = true;
  o.prefill_chunk = 64;
  o.on_progress = [&](int done, int generated) { seen.emplace_back(done, generated); };
  auto r = run(o);
  ASSERT_TRUE(r.ok());
  const std::vector<std::pair<int, int>> expected = {{64, 0}, {128, 0}, {150, 0}, {150, 1}, {150, 2}, {150, 3}};
  EXPECT_EQ(seen, expected);
  EXPECT_GT(r->ttft_ms, 0);
  EXPECT_EQ(r->n_prompt, 150);
}

TEST_F(Generate, ChunkedPrefillGivesTheLogitsOfOneEval) {
  prompt_ = spread_tokens(*engine_, 300);
  GenerateOptions o = greedy(4);
  o.ignore_eog = true;
  o.record_logits = true;
  o.prefill_chunk = 64;
  auto chunked = run(o);
  o.prefill_chunk = 1024;
  auto whole = run(o);
  ASSERT_TRUE(chunked.ok() && whole.ok());
  EXPECT_EQ(chunked->prompt_logits.size(), 300u * engine_->info().n_vocab);
  EXPECT_TRUE(chunked->prompt_logits == whole->prompt_logits);
  EXPECT_TRUE(chunked->next_logits == whole->next_logits);
  EXPECT_EQ(chunked->generated, whole->generated);
}

// Allows exactly `sequence`, then only the end.
class FixedSequence : public TokenConstraint {
 public:
  explicit FixedSequence(std::vector<int32_t> sequence) : sequence_(std::move(sequence)) {}
  void mask(std::span<float> logits) override {
    ++masks;
    for (size_t id = 0; id < logits.size(); ++id)
      if (done_ == sequence_.size() || static_cast<int32_t>(id) != sequence_[done_]) logits[id] = kNegInf;
  }
  Status accept(int32_t token) override {
    if (done_ == sequence_.size() || token != sequence_[done_])
      return Status::error("token " + std::to_string(token) + " is not allowed here");
    ++done_;
    return {};
  }
  bool can_end() const override { return done_ == sequence_.size(); }
  int masks = 0;

 private:
  std::vector<int32_t> sequence_;
  size_t done_ = 0;
};

TEST_F(Generate, AConstraintDecidesTheOutputAndItsEnd) {
  ASSERT_FALSE(engine_->info().eog_tokens.empty());
  const std::vector<int32_t> wanted = engine_->tokenize(" the cat sat on the mat", false, false);
  for (float temperature : {0.0f, 1.5f}) {
    FixedSequence constraint(wanted);
    GenerateOptions o = greedy(50);
    o.sampling.temperature = temperature;
    o.constraint = &constraint;
    o.logprobs = true;
    o.top_logprobs = 3;
    auto r = run(o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->text, " the cat sat on the mat");
    ASSERT_EQ(r->generated.size(), wanted.size() + 1);
    EXPECT_TRUE(std::equal(wanted.begin(), wanted.end(), r->generated.begin()));
    EXPECT_TRUE(engine_->is_end_of_generation(r->generated.back()));
    EXPECT_EQ(r->stop_reason, "eog");
    EXPECT_EQ(constraint.masks, static_cast<int>(wanted.size()) + 1);
    // Only allowed tokens carry probability: one while the sequence runs.
    for (size_t i = 0; i < wanted.size(); ++i) {
      EXPECT_EQ(r->logprobs[i].chosen.logprob, 0.0f);
      ASSERT_EQ(r->logprobs[i].top.size(), 1u);
      EXPECT_EQ(r->logprobs[i].top[0].token, wanted[i]);
    }
  }
}

TEST_F(Generate, AConstraintThatAllowsNothingIsAnError) {
  FixedSequence nothing({-1});  // never complete, never allows a token
  GenerateOptions o = greedy(5);
  o.constraint = &nothing;
  auto r = run(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("constraint"), std::string::npos);
  o.ignore_eog = true;
  EXPECT_FALSE(run(o).ok());  // the constraint decides the end, not ignore_eog
}

// Allows every token but accepts none: a broken constraint surfaces as an error.
class AcceptsNothing : public TokenConstraint {
 public:
  void mask(std::span<float>) override {}
  Status accept(int32_t) override { return Status::error("refused"); }
  bool can_end() const override { return false; }
};

TEST_F(Generate, ARefusedTokenIsAnError) {
  AcceptsNothing constraint;
  GenerateOptions o = greedy(5);
  o.constraint = &constraint;
  auto r = run(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("refused"), std::string::npos);
}

TEST_F(Generate, LogitBiasForcesAToken) {
  const int32_t forced = engine_->tokenize(" cat", false, false).at(0);
  for (float temperature : {0.0f, 0.8f}) {
    GenerateOptions o = greedy(8);
    o.sampling.temperature = temperature;
    o.sampling.logit_bias = {{forced, 100.0f}};
    auto r = run(o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->generated, std::vector<int32_t>(8, forced));
  }
  GenerateOptions o = greedy(1);
  o.sampling.logit_bias = {{engine_->info().n_vocab, 1.0f}};
  EXPECT_FALSE(run(o).ok());
  o.sampling.logit_bias = {{forced, NAN}};
  EXPECT_FALSE(run(o).ok());
}

// Control tokens give no text, but those a caller names (a chat format's
// tool-call markers) do.
TEST_F(Generate, ShownControlTokensKeepTheirText) {
  const auto start = engine_->find_token("<|im_start|>");
  ASSERT_TRUE(start.has_value());
  ASSERT_TRUE(engine_->is_control(*start));
  ASSERT_FALSE(engine_->is_end_of_generation(*start));
  GenerateOptions o = greedy(2);
  o.sampling.logit_bias = {{*start, 100.0f}};
  auto hidden = run(o);
  ASSERT_TRUE(hidden.ok()) << hidden.status().message();
  EXPECT_EQ(hidden->generated, std::vector<int32_t>(2, *start));
  EXPECT_EQ(hidden->text, "");
  o.shown_tokens = {*start};
  std::string streamed;
  auto shown = run(o, [&](std::string_view t) { streamed += t; });
  ASSERT_TRUE(shown.ok()) << shown.status().message();
  EXPECT_EQ(shown->text, "<|im_start|><|im_start|>");
  EXPECT_EQ(streamed, shown->text);
  o.shown_tokens = {*start, 0};
  auto unsorted = run(o);
  ASSERT_FALSE(unsorted.ok());
  EXPECT_NE(unsorted.status().message().find("shown_tokens"), std::string::npos) << unsorted.status().message();
}

TEST_F(Generate, LogprobsAreTheLogSoftmaxOfTheBiasedLogits) {
  const int32_t favoured = engine_->tokenize(" dog", false, false).at(0);
  GenerateOptions o = greedy(6);
  o.ignore_eog = true;
  o.record_logits = true;
  o.logprobs = true;
  o.top_logprobs = 5;
  o.sampling.temperature = 0.7f;  // logprobs do not depend on it
  o.sampling.seed = 11;
  o.sampling.logit_bias = {{favoured, 3.0f}};
  auto r = run(o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->logprobs.size(), r->generated.size());
  const size_t n_vocab = engine_->info().n_vocab;
  for (size_t i = 0; i < r->generated.size(); ++i) {
    // The row that chose token i: after the prompt, then after token i - 1.
    std::vector<float> row(n_vocab);
    const float* from = i == 0 ? r->next_logits.data() : &r->generated_logits[(i - 1) * n_vocab];
    std::copy(from, from + n_vocab, row.begin());
    row[favoured] += 3.0f;
    const std::vector<double> expected = log_softmax(row);
    const TokenLogprobs& lp = r->logprobs[i];
    EXPECT_EQ(lp.chosen.token, r->generated[i]);
    EXPECT_NEAR(lp.chosen.logprob, expected[r->generated[i]], 1e-4);
    ASSERT_EQ(lp.top.size(), 5u);
    std::vector<int32_t> ids(n_vocab);
    for (size_t id = 0; id < n_vocab; ++id) ids[id] = static_cast<int32_t>(id);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return expected[a] > expected[b]; });
    double mass = 0;
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(lp.top[k].token, ids[k]) << "step " << i << " rank " << k;
      EXPECT_NEAR(lp.top[k].logprob, expected[ids[k]], 1e-4);
      EXPECT_LE(lp.top[k].logprob, 0.0f);
      mass += std::exp(lp.top[k].logprob);
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
  }
  o.top_logprobs = 21;
  EXPECT_FALSE(run(o).ok());
}

}  // namespace
}  // namespace revis
