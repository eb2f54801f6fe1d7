// qwen35's MTP block against llama.cpp (tests/testdata/qwen35/mtp, made by
// scripts/golden/llama_mtp_golden.cpp): the target's hidden states over
// the `en` prompt, then the block over (token p, hidden state at p - 1) one
// position at a time in its one-layer cache, give llama.cpp's logits at
// every position within the F16 tolerance of ../shared/testdata/README.md,
// with the same best token wherever it is clear.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "model/model.h"
#include "support/testdata.h"

namespace revis {
namespace {

const std::string kDir = REVIS_REPO_TESTDATA_DIR "qwen35/mtp/";

TEST(Qwen35Mtp, LogitsMatchLlamaCpp) {
  std::ifstream json_in(kDir + "qwen35-mtp-F16.en.json");
  ASSERT_TRUE(json_in.good());
  const nlohmann::json golden = nlohmann::json::parse(json_in);
  const std::vector<int32_t> tokens = golden["prompt_tokens"].get<std::vector<int32_t>>();
  const int n = static_cast<int>(tokens.size()), n_vocab = golden["n_vocab"].get<int>();
  const std::vector<float> gold = testing::read_f32(kDir + golden["logits_file"].get<std::string>());
  ASSERT_EQ(gold.size(), static_cast<size_t>(n) * n_vocab);

  auto file = gguf::GgufFile::open(kDir + "qwen35-mtp-F16.gguf");
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto model = Model::load(std::shared_ptr<const gguf::GgufFile>(std::move(*file)));
  ASSERT_TRUE(model.ok()) << model.status().message();
  Model& m = **model;
  ASSERT_TRUE(m.has_nextn());
  const int d = m.config().n_embd;
  ThreadPool pool(2);

  KvCache kv(m.config(), 256);
  std::vector<float> logits, hidden(static_cast<size_t>(n) * d);
  const Model::SequenceInput seq{tokens, 0, &kv, false, &logits, hidden.data()};
  ASSERT_TRUE(m.forward({&seq, 1}, pool).ok());

  ModelConfig one = m.config();  // the block's cache: one full-attention layer
  one.n_layer = 1;
  one.delta_net.recurrent = {false};
  KvCache block_kv(one, 256);
  std::vector<float> row_hidden(d), out_hidden;
  double worst = 0;
  for (int p = 0; p < n; ++p) {
    std::fill(row_hidden.begin(), row_hidden.end(), 0.0f);
    if (p > 0) std::copy_n(&hidden[static_cast<size_t>(p - 1) * d], d, row_hidden.begin());
    ASSERT_TRUE(m.forward_nextn({&tokens[p], 1}, row_hidden, p, block_kv, pool, logits, out_hidden).ok());
    const float* g = &gold[static_cast<size_t>(p) * n_vocab];
    double sum = 0, err = 0;
    for (int j = 0; j < n_vocab; ++j) sum += double{g[j]} * g[j];
    const double rms = std::sqrt(sum / n_vocab);
    for (int j = 0; j < n_vocab; ++j) err = std::max(err, std::fabs(double{logits[j]} - g[j]) / rms);
    worst = std::max(worst, err);
    EXPECT_LE(err, 0.03) << "position " << p;
    std::vector<int> order(n_vocab);
    for (int j = 0; j < n_vocab; ++j) order[j] = j;
    std::partial_sort(order.begin(), order.begin() + 2, order.end(), [&](int a, int b) { return g[a] > g[b]; });
    if (g[order[0]] - g[order[1]] > 0.2 * rms) {
      EXPECT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(), order[0]) << "position " << p;
    }
  }
  std::printf("qwen35 MTP block against llama.cpp: %d positions, max err %.5f\n", n, worst);
}

}  // namespace
}  // namespace revis
