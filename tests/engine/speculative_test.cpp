// Speculative decoding (revis/draft.h, generate.h): stepwise evaluation is
// bit-identical to decoding one token at a time, greedy output with a
// drafter (prompt lookup, a Q4_0 draft of a Q8_0 target) equals greedy
// output without one on several prompts at 1 and 2 threads, also under a
// constraint with logit bias and logprobs, and a draft model of another
// vocabulary is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "revis/draft.h"
#include "revis/engine.h"
#include "revis/generate.h"
#include "support/greedy_identity.h"
#include "support/kernel_backends.h"
#include "support/testdata.h"

namespace revis {
namespace {

using testing::expect_same_greedy_output;
using testing::greedy;
using testing::kPrompts;

std::unique_ptr<Engine> load(const std::string& file, int threads) {
  auto engine =
      Engine::load({.model_path = testing::testdata("models/" + file).string(), .n_ctx = 512, .n_threads = threads});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return engine.ok() ? std::move(*engine) : nullptr;
}

class Stepwise : public ::testing::TestWithParam<KernelBackend> {};

// Every row and every KV row: the rows of tokens evaluated after a
// stepwise batch would differ if its cache rows did.
TEST_P(Stepwise, RowsEqualOneTokenAtATime) {
  const testing::ScopedKernelBackend backend(GetParam());
  ASSERT_TRUE(backend.ok());
  for (const char* file : {"llama-bpe-Q8_0.gguf", "qwen2-Q4_0.gguf", "qwen3-Q4_K_M.gguf", "qwen3moe-Q8_0.gguf"}) {
    auto engine = load(file, 2);
    ASSERT_TRUE(engine);
    const int n_vocab = engine->info().n_vocab;
    const std::vector<int32_t> prompt = engine->tokenize("The quick brown fox jumps over the lazy dog", false, false);
    std::vector<int32_t> tokens(23);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 389 + 11) % n_vocab);
    auto steps = engine->new_session(), batches = engine->new_session();
    ASSERT_TRUE(steps->eval(prompt).ok());
    ASSERT_TRUE(batches->eval(prompt).ok());
    std::vector<std::vector<float>> rows;
    for (int32_t t : tokens) {
      ASSERT_TRUE(steps->eval({&t, 1}).ok());
      rows.emplace_back(steps->logits(0).begin(), steps->logits(0).end());
    }
    size_t at = 0;
    for (size_t len : {1, 5, 9, 8}) {
      ASSERT_TRUE(batches->eval(std::span(tokens).subspan(at, len), /*all_logits=*/true).ok());
      ASSERT_EQ(batches->n_logit_rows(), static_cast<int>(len));
      for (size_t k = 0; k < len; ++k)
        ASSERT_EQ(std::memcmp(batches->logits(static_cast<int>(k)).data(), rows[at + k].data(), n_vocab * sizeof(float)), 0)
            << file << ": token " << at + k << " (a batch of " << len << ")";
      at += len;
    }
    ASSERT_EQ(at, tokens.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Stepwise, ::testing::ValuesIn(testing::supported_kernel_backends()),
                         [](const ::testing::TestParamInfo<KernelBackend>& info) { return kernel_backend_name(info.param); });

TEST(Speculative, PromptLookupKeepsGreedyOutput) {
  for (int threads : {1, 2}) {
    auto engine = load("llama-bpe-Q8_0.gguf", threads);
    ASSERT_TRUE(engine);
    auto lookup = prompt_lookup_drafter();
    const auto [drafted, accepted] = expect_same_greedy_output(*engine, *lookup, greedy(48));
    std::printf("lookup %d threads: drafted %d accepted %d\n", threads, drafted, accepted);
    EXPECT_GT(drafted, 0) << threads << " threads";
  }
}

TEST(Speculative, DraftModelKeepsGreedyOutput) {
  for (int threads : {1, 2}) {
    auto engine = load("llama-bpe-Q8_0.gguf", threads);
    ASSERT_TRUE(engine);
    auto draft = load_draft_model(*engine, testing::testdata("models/llama-bpe-Q4_0.gguf").string());
    ASSERT_TRUE(draft.ok()) << draft.status().message();
    const auto [drafted, accepted] = expect_same_greedy_output(*engine, **draft, greedy(40));
    std::printf("draft %d threads: drafted %d accepted %d\n", threads, drafted, accepted);
    // The same weights at fewer bits mostly agree with the target.
    EXPECT_GT(drafted, 0) << threads << " threads";
    EXPECT_GT(accepted, drafted / 2) << threads << " threads";
  }
}

// Allows only even token ids (and ending), counting the tokens it accepts.
class EvenTokens : public TokenConstraint {
 public:
  void mask(std::span<float> logits) override {
    for (size_t id = 1; id < logits.size(); id += 2) logits[id] = -INFINITY;
  }
  Status accept(int32_t token) override {
    ++accepted;
    return token % 2 == 0 ? Status() : Status::error("odd token " + std::to_string(token));
  }
  bool can_end() const override { return true; }
  int accepted = 0;
};

TEST(Speculative, ConstraintBiasAndLogprobsAreKept) {
  auto engine = load("qwen2-Q8_0.gguf", 2);
  ASSERT_TRUE(engine);
  auto session = engine->new_session();
  const std::vector<int32_t> prompt = engine->tokenize(kPrompts[0], false, false);
  GenerateOptions o;
  o.max_tokens = 30;
  o.sampling.temperature = 0;
  o.sampling.logit_bias = {{prompt[3], 2.0f}, {prompt[5], -1.0f}};
  o.logprobs = true;
  o.top_logprobs = 3;
  EvenTokens plain_constraint, fast_constraint;
  o.constraint = &plain_constraint;
  auto plain = generate(*engine, *session, prompt, o, nullptr);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  auto lookup = prompt_lookup_drafter();
  o.constraint = &fast_constraint;
  o.drafter = lookup.get();
  o.draft_max = 5;
  auto fast = generate(*engine, *session, prompt, o, nullptr);
  ASSERT_TRUE(fast.ok()) << fast.status().message();
  EXPECT_GT(fast->draft_tokens, 0);
  EXPECT_EQ(fast->generated, plain->generated);
  EXPECT_EQ(fast_constraint.accepted, plain_constraint.accepted);
  ASSERT_EQ(fast->logprobs.size(), plain->logprobs.size());
  for (size_t i = 0; i < fast->logprobs.size(); ++i) {
    EXPECT_EQ(fast->logprobs[i].chosen.logprob, plain->logprobs[i].chosen.logprob) << i;
    ASSERT_EQ(fast->logprobs[i].top.size(), plain->logprobs[i].top.size());
    for (size_t k = 0; k < fast->logprobs[i].top.size(); ++k)
      EXPECT_EQ(fast->logprobs[i].top[k].token, plain->logprobs[i].top[k].token);
  }
}

TEST(Speculative, SampledOutputStaysWithinTheTargetsSupport) {
  // With temperature, top-k 1 makes the target deterministic: the rejection
  // sampler must then give the greedy output whatever the drafts were.
  auto engine = load("llama-bpe-Q8_0.gguf", 2);
  ASSERT_TRUE(engine);
  auto session = engine->new_session();
  const std::vector<int32_t> prompt = engine->tokenize(kPrompts[1], true, false);
  GenerateOptions o = greedy(40);
  auto plain = generate(*engine, *session, prompt, o, nullptr);
  ASSERT_TRUE(plain.ok());
  auto lookup = prompt_lookup_drafter();
  o.sampling.temperature = 0.9f;
  o.sampling.top_k = 1;
  o.drafter = lookup.get();
  o.draft_max = 8;
  auto fast = generate(*engine, *session, prompt, o, nullptr);
  ASSERT_TRUE(fast.ok()) << fast.status().message();
  EXPECT_EQ(fast->generated, plain->generated);
}

TEST(Speculative, ADraftModelOfAnotherVocabularyIsRefused) {
  auto engine = load("llama-bpe-Q8_0.gguf", 1);
  ASSERT_TRUE(engine);
  // (qwen2's truncated vocabulary happens to be llama-bpe's.)
  for (const char* other : {"llama-spm-Q4_0.gguf"}) {
    auto draft = load_draft_model(*engine, testing::testdata(std::string("models/") + other).string());
    ASSERT_FALSE(draft.ok()) << other;
    EXPECT_NE(draft.status().message().find("vocabulary"), std::string::npos) << draft.status().message();
    EXPECT_NE(draft.status().message().find(other), std::string::npos) << draft.status().message();
  }
}

TEST(Speculative, PromptLookupProposesWhatFollowedTheLatestMatch) {
  auto lookup = prompt_lookup_drafter(3);
  const std::vector<int32_t> context = {1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3};
  auto d = lookup->draft(context, 3);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (std::vector<int32_t>{7, 8, 5}));  // the latest "1 2 3" before the end
  d = lookup->draft(std::vector<int32_t>{4, 5, 6, 4}, 4);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (std::vector<int32_t>{5, 6, 4, 5}));  // down to one token, copied on into the draft
  d = lookup->draft(std::vector<int32_t>{4, 5, 6}, 4);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->empty());
}

TEST(Speculative, PromptLookupFollowsAPeriodPastTheEndOfTheContext) {
  auto lookup = prompt_lookup_drafter(3);
  // "A B C A B C A B": the latest "C A B" is one period back.
  auto d = lookup->draft(std::vector<int32_t>{10, 11, 12, 10, 11, 12, 10, 11}, 8);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (std::vector<int32_t>{12, 10, 11, 12, 10, 11, 12, 10}));
  // A period of one: the same token repeated.
  d = lookup->draft(std::vector<int32_t>{3, 7, 7, 7, 7}, 6);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (std::vector<int32_t>(6, 7)));
  d = lookup->draft(std::vector<int32_t>{7, 7}, 5);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (std::vector<int32_t>(5, 7)));
}

TEST(Speculative, PromptLookupCopiesAFarMatchBoundedByMax) {
  auto lookup = prompt_lookup_drafter(3);
  // The match is far back and what followed it stays inside the context.
  const std::vector<int32_t> context = {1, 2, 3, 20, 21, 22, 23, 24, 25, 9, 8, 7, 6, 1, 2, 3};
  auto d = lookup->draft(context, 4);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (std::vector<int32_t>{20, 21, 22, 23}));
  d = lookup->draft(context, 8);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (std::vector<int32_t>{20, 21, 22, 23, 24, 25, 9, 8}));
}

TEST(Speculative, PromptLookupDraftsNothingFromAnEmptyOrOneTokenContext) {
  auto lookup = prompt_lookup_drafter(3);
  auto d = lookup->draft(std::vector<int32_t>{}, 8);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->empty());
  d = lookup->draft(std::vector<int32_t>{5}, 8);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->empty());
}

}  // namespace
}  // namespace revis
