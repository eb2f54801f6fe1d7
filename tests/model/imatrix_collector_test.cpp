// ImatrixCollector on synthetic models: the sums it collects for one matrix
// equal the squared activations computed directly, and experts are counted
// by the tokens routed to them.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "support/imatrix_reference.h"
#include "support/testdata.h"
#include "tools/imatrix_collector.h"
#include "tools/synthetic.h"

namespace revis {
namespace {

using testing::TempDir;

struct Loaded {
  std::shared_ptr<const gguf::GgufFile> file;
  std::unique_ptr<Model> model;
};

Loaded write_and_load(const SyntheticSpec& spec, const std::string& path) {
  ThreadPool pool(2);
  EXPECT_TRUE(write_synthetic_model(spec, path, pool, nullptr).ok());
  auto file = gguf::GgufFile::open(path);
  EXPECT_TRUE(file.ok());
  Loaded loaded{std::move(*file), nullptr};
  auto model = Model::load(loaded.file);
  EXPECT_TRUE(model.ok()) << model.status().message();
  loaded.model = std::move(*model);
  return loaded;
}

void run(Model& model, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  KvCache kv(model.config(), 64);
  std::vector<float> logits;
  ASSERT_TRUE(model.forward(tokens, 0, kv, pool, false, logits).ok());
}

// Layer 0's attn_q sees rms_norm(embedding) * attn_norm of every token.
TEST(ImatrixCollector, SumsMatchTheSquaredInputsOfAMatrix) {
  SyntheticSpec spec;
  spec.n_vocab = 320;
  TempDir tmp;
  Loaded m = write_and_load(spec, tmp.file("m.gguf"));
  ImatrixCollector collector(*m.file, {});
  m.model->set_matmul_observer(&collector);
  const std::vector<int32_t> tokens = {1, 50, 300, 7, 42, 99, 260, 3, 50};
  run(*m.model, tokens);
  ASSERT_TRUE(collector.status().ok());

  const std::vector<double> expected = testing::attn_q_input_squares(*m.file, tokens, m.model->config().rms_eps);
  const int64_t d = static_cast<int64_t>(expected.size());
  const auto& entries = collector.imatrix().entries;
  ASSERT_TRUE(entries.count("blk.0.attn_q.weight"));
  const ImatrixEntry& q = entries.at("blk.0.attn_q.weight");
  ASSERT_EQ(q.n_per_row, d);
  ASSERT_EQ(q.counts, std::vector<float>{static_cast<float>(tokens.size())});
  for (int64_t j = 0; j < d; ++j)
    EXPECT_NEAR(q.sum2[static_cast<size_t>(j)], expected[static_cast<size_t>(j)], 1e-4 * expected[static_cast<size_t>(j)] + 1e-6)
        << "channel " << j;
  // attn_k and attn_v take the same input; every layer's matrices are there,
  // the output matrix is not.
  EXPECT_EQ(entries.at("blk.0.attn_k.weight").sum2, q.sum2);
  EXPECT_TRUE(entries.count("blk.1.ffn_down.weight"));
  EXPECT_FALSE(entries.count("output.weight"));
}

// A token is routed to n_expert_used experts: the experts' counts add up to
// that many per token, and an expert's sums are over its own tokens only.
TEST(ImatrixCollector, CountsEachExpertsTokens) {
  SyntheticSpec spec;
  spec.arch = "qwen3moe";
  spec.n_vocab = 320;
  spec.n_expert = 4;
  spec.n_expert_used = 2;
  spec.n_ff_expert = 256;
  TempDir tmp;
  Loaded m = write_and_load(spec, tmp.file("m.gguf"));
  ImatrixCollector collector(*m.file, {});
  m.model->set_matmul_observer(&collector);
  const std::vector<int32_t> tokens = {1, 50, 300, 7, 42, 99, 260, 3};
  run(*m.model, tokens);
  const ImatrixEntry& up = collector.imatrix().entries.at("blk.0.ffn_up_exps.weight");
  ASSERT_EQ(up.n_mat, 4);
  float total = 0;
  for (float c : up.counts) total += c;
  EXPECT_EQ(total, static_cast<float>(tokens.size() * 2));
  for (int e = 0; e < 4; ++e) {
    double sum = 0;
    for (int64_t j = 0; j < up.n_per_row; ++j) sum += up.sum2[static_cast<size_t>(e * up.n_per_row + j)];
    EXPECT_EQ(up.counts[static_cast<size_t>(e)] == 0, sum == 0) << "expert " << e;
  }
}

}  // namespace
}  // namespace revis
