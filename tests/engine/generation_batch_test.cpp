// GenerationBatch (revis/generate.h): generations sharing each forward pass
// produce exactly what each produces alone through generate(), whatever the
// step budget, with every slot's sampler, seed, constraint, stop strings,
// logprobs and drafter its own; a generation joining mid-run or cancelled
// changes no other's output.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "revis/draft.h"
#include "revis/engine.h"
#include "revis/generate.h"
#include "support/spread_tokens.h"
#include "support/testdata.h"

namespace revis {
namespace {

using Tokens = std::vector<int32_t>;

// Allows only tokens whose id is a multiple of `modulus` (end of
// generation always): a constraint whose leak into another slot would show.
class MultiplesOnly : public TokenConstraint {
 public:
  explicit MultiplesOnly(int modulus) : modulus_(modulus) {}
  void mask(std::span<float> logits) override {
    for (size_t id = 0; id < logits.size(); ++id)
      if (id % modulus_ != 0) logits[id] = -std::numeric_limits<float>::infinity();
  }
  Status accept(int32_t token) override {
    return token % modulus_ == 0 ? Status{} : Status::error("token " + std::to_string(token) + " is not allowed");
  }
  bool can_end() const override { return true; }

 private:
  int modulus_;
};

struct Slot {
  Tokens prompt;
  GenerateOptions options;
  std::unique_ptr<MultiplesOnly> constraint;
  std::unique_ptr<Drafter> drafter;
  std::atomic<bool> cancel{false};
};

// Eight slots, each asking for something the others do not.
std::vector<std::unique_ptr<Slot>> slots(Engine& engine) {
  std::vector<std::unique_ptr<Slot>> out;
  for (int i = 0; i < 8; ++i) {
    auto s = std::make_unique<Slot>();
    s->prompt = engine.tokenize("Slot " + std::to_string(i) + ": the lighthouse keeper wrote", true, false);
    GenerateOptions& o = s->options;
    o.max_tokens = 10;
    o.sampling.temperature = 0;
    switch (i) {
      case 1: o.sampling.temperature = 0.9f, o.sampling.seed = 7, o.logprobs = true, o.top_logprobs = 3; break;
      case 2: o.sampling.temperature = 1.0f, o.sampling.seed = 11, o.max_tokens = 24; break;
      case 3:
        s->constraint = std::make_unique<MultiplesOnly>(3);
        o.constraint = s->constraint.get();
        break;
      case 4: o.sampling.temperature = 0.7f, o.sampling.top_k = 5, o.sampling.seed = 3, o.ignore_eog = true; break;
      case 5: o.max_tokens = 0; break;
      case 6: s->prompt = testing::spread_tokens(engine.info().n_vocab, 90, 6), o.ignore_eog = true, o.max_tokens = 6; break;
      case 7:
        s->prompt = engine.tokenize("one two three four one two three four one two three", true, false);
        s->drafter = prompt_lookup_drafter();
        o.drafter = s->drafter.get();
        o.draft_max = 4;
        o.ignore_eog = true;
        break;
    }
    o.cancel = &s->cancel;
    out.push_back(std::move(s));
  }
  return out;
}

GenerateResult alone(Engine& engine, const Slot& slot) {
  auto session = engine.new_session();
  auto r = generate(engine, *session, slot.prompt, slot.options, nullptr);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : GenerateResult{};
}

void expect_same(const GenerateResult& got, const GenerateResult& want, int slot) {
  SCOPED_TRACE("slot " + std::to_string(slot));
  EXPECT_EQ(got.generated, want.generated);
  EXPECT_EQ(got.text, want.text);
  EXPECT_EQ(got.stop_reason, want.stop_reason);
  EXPECT_EQ(got.next_logits, want.next_logits);
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
  for (size_t k = 0; k < got.logprobs.size(); ++k) {
    EXPECT_EQ(got.logprobs[k].chosen.logprob, want.logprobs[k].chosen.logprob);
    EXPECT_EQ(got.logprobs[k].top.size(), want.logprobs[k].top.size());
  }
}

std::unique_ptr<Engine> load() {
  auto engine = Engine::load(
      {.model_path = testing::testdata("models/llama-bpe-Q8_0.gguf").string(), .n_ctx = 256, .n_threads = 2});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return engine.ok() ? std::move(*engine) : nullptr;
}

TEST(GenerationBatch, EverySlotGetsWhatItGetsAlone) {
  auto engine = load();
  ASSERT_TRUE(engine);
  auto slot = slots(*engine);
  // Slot 2 stops at a piece of its own output, found alone.
  const GenerateResult unstopped = alone(*engine, *slot[2]);
  ASSERT_GE(unstopped.text.size(), 8u);
  slot[2]->options.stop = {unstopped.text.substr(5, 2)};
  std::vector<GenerateResult> want;
  for (const auto& s : slot) want.push_back(alone(*engine, *s));
  EXPECT_EQ(want[2].stop_reason, "stop");

  for (int step_tokens : {4, 16, 256}) {
    SCOPED_TRACE("step budget " + std::to_string(step_tokens));
    GenerationBatch batch(*engine, step_tokens);
    std::vector<std::unique_ptr<Session>> sessions;
    std::vector<GenerateResult> got(slot.size());
    std::vector<std::string> streamed(slot.size());
    for (size_t i = 0; i < slot.size(); ++i) {
      sessions.push_back(engine->new_session());
      batch.add(*sessions[i], slot[i]->prompt, slot[i]->options,
                [&streamed, i](std::string_view text) { streamed[i] += text; },
                [&got, i](Result<GenerateResult> r) {
                  ASSERT_TRUE(r.ok()) << r.status().message();
                  got[i] = std::move(*r);
                });
    }
    int steps = 0;
    while (batch.step() > 0) ASSERT_LT(++steps, 1000);
    for (size_t i = 0; i < slot.size(); ++i) {
      expect_same(got[i], want[i], static_cast<int>(i));
      EXPECT_EQ(streamed[i], want[i].text);
    }
  }
}

// Four slots run; four more join after three steps; slot 1 is cancelled
// after five. The others' outputs are still their lone ones.
TEST(GenerationBatch, JoiningAndCancellingLeaveTheOthersAlone) {
  auto engine = load();
  ASSERT_TRUE(engine);
  auto slot = slots(*engine);
  std::vector<GenerateResult> want;
  for (const auto& s : slot) want.push_back(alone(*engine, *s));

  GenerationBatch batch(*engine, 8);
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<GenerateResult> got(slot.size());
  auto add = [&](size_t i) {
    sessions.push_back(engine->new_session());
    batch.add(*sessions.back(), slot[i]->prompt, slot[i]->options, nullptr, [&got, i](Result<GenerateResult> r) {
      ASSERT_TRUE(r.ok()) << r.status().message();
      got[i] = std::move(*r);
    });
  };
  for (size_t i = 0; i < 4; ++i) add(i);
  int steps = 0;
  while (batch.step() > 0 || steps < 3) {
    ++steps;
    if (steps == 3)
      for (size_t i = 4; i < slot.size(); ++i) add(i);
    if (steps == 5) slot[1]->cancel = true;
    ASSERT_LT(steps, 1000);
  }
  EXPECT_EQ(got[1].stop_reason, "cancelled");
  for (size_t i = 0; i < slot.size(); ++i)
    if (i != 1) expect_same(got[i], want[i], static_cast<int>(i));
}

TEST(GenerationBatch, ABadRequestFailsAloneAndEarly) {
  auto engine = load();
  ASSERT_TRUE(engine);
  auto slot = slots(*engine);
  GenerateOptions bad = slot[0]->options;
  bad.max_tokens = -1;
  GenerationBatch batch(*engine);
  auto a = engine->new_session(), b = engine->new_session();
  std::string error;
  GenerateResult fine;
  batch.add(*a, slot[0]->prompt, bad, nullptr, [&](Result<GenerateResult> r) { error = r.status().message(); });
  batch.add(*b, slot[0]->prompt, slot[0]->options, nullptr, [&](Result<GenerateResult> r) { fine = *r; });
  while (batch.step() > 0) {
  }
  EXPECT_NE(error.find("max_tokens"), std::string::npos) << error;
  expect_same(fine, alone(*engine, *slot[0]), 0);
}

}  // namespace
}  // namespace revis
