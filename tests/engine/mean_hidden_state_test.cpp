// Session::mean_hidden_state, what embeddings are made of: the final hidden
// state is the one the output projection turns into the logits, and the
// mean is over the tokens given, however the forward pass batches them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "revis/engine.h"
#include "support/testdata.h"

namespace revis {
namespace {

const std::string kModel = "models/qwen2-Q8_0.gguf";

std::unique_ptr<Engine> load() {
  auto engine = Engine::load({.model_path = testing::testdata(kModel).string(), .n_ctx = 512, .n_threads = 2});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Row `row` of the output projection (the token embeddings when tied), as floats.
std::vector<float> output_row(const gguf::GgufFile& file, int64_t row) {
  const gguf::TensorInfo* w = file.tensor("output.weight");
  if (!w) w = file.tensor("token_embd.weight");
  const int64_t n = w->dims[0];
  std::vector<float> out(n);
  dequantize_row(w->type, w->data + row * row_bytes(w->type, n), out.data(), n);
  return out;
}

TEST(MeanHiddenState, IsWhatTheOutputProjectionTurnsIntoTheLogits) {
  auto engine = load();
  ASSERT_TRUE(engine);
  const int32_t token = engine->tokenize("Hello", false, false).at(0);
  auto pooled = engine->new_session();
  auto h = pooled->mean_hidden_state({&token, 1});
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->size(), static_cast<size_t>(engine->info().n_embd));
  EXPECT_EQ(pooled->n_past(), 1);
  EXPECT_EQ(pooled->n_logit_rows(), 0);

  auto evaluated = engine->new_session();
  ASSERT_TRUE(evaluated->eval({&token, 1}).ok());
  const std::span<const float> logits = evaluated->logits();
  float scale = 0;
  for (float l : logits) scale = std::max(scale, std::fabs(l));
  auto file = gguf::GgufFile::open(testing::testdata(kModel).string());
  ASSERT_TRUE(file.ok());
  // The model's product quantizes its input to 8 bits: close, not equal.
  const int64_t best = std::max_element(logits.begin(), logits.end()) - logits.begin();
  for (int64_t row : {int64_t{0}, int64_t{17}, int64_t{1000}, best, int64_t{engine->info().n_vocab - 1}}) {
    const std::vector<float> w = output_row(**file, row);
    double dot = 0;
    for (size_t i = 0; i < w.size(); ++i) dot += static_cast<double>(w[i]) * (*h)[i];
    EXPECT_NEAR(dot, logits[row], 0.02 * scale + 1e-3) << "row " << row;
  }
}

TEST(MeanHiddenState, IsTheMeanOverTheTokensHoweverTheyAreBatched) {
  auto engine = load();
  ASSERT_TRUE(engine);
  const std::vector<int32_t> tokens = engine->tokenize("The quick brown fox jumps over the lazy dog", false, false);
  ASSERT_GE(tokens.size(), 5u);
  auto whole_session = engine->new_session();
  auto whole = whole_session->mean_hidden_state(tokens);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole_session->history(), tokens);

  // One token at a time in one session (each attends to those before it):
  // the mean of the single-token states.
  auto steps = engine->new_session();
  std::vector<double> mean(whole->size(), 0.0);
  for (int32_t t : tokens) {
    auto h = steps->mean_hidden_state({&t, 1});
    ASSERT_TRUE(h.ok()) << h.status().message();
    for (size_t i = 0; i < mean.size(); ++i) mean[i] += (*h)[i] / tokens.size();
  }
  double scale = 0;
  for (float v : *whole) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  for (size_t i = 0; i < mean.size(); ++i) ASSERT_NEAR(mean[i], (*whole)[i], 0.01 * scale) << "value " << i;

  // What does not fit the context changes nothing.
  const std::vector<int32_t> too_many(600, tokens[0]);
  auto fresh = engine->new_session();
  EXPECT_FALSE(fresh->mean_hidden_state(too_many).ok());
  EXPECT_EQ(fresh->n_past(), 0);
  EXPECT_FALSE(fresh->mean_hidden_state({}).ok());
}

}  // namespace
}  // namespace revis
