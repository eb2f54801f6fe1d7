// The model's layers on the device with the shared-memory build of the
// reducing shaders, end to end. The engine (and so the golden and session
// tests) runs the subgroup build wherever the device has it, lavapipe
// included; here Model::offload gets a device opened without it. A
// prompt's logits agree with the subgroup build's within 1e-3 (they differ
// only in the order of the sums; the golden tests hold the subgroup build
// to llama.cpp's logits, whose tolerances are a hundred times wider), and a
// sequence's logits are the same bits alone and beside another in one
// batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/thread_pool.h"
#include "gguf/gguf.h"
#include "gpu/device.h"
#include "gpu_test_device.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "support/testdata.h"

namespace revis {
namespace {

constexpr int kContext = 64;

std::vector<int32_t> some_tokens(int n, int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 37 + seed * 101 + 11) % 1000 + 3));
  return t;
}

// The model of testdata set/models/stem.gguf ("deepseek2/deepseek2-Q4_K_M"),
// every layer on device 0 opened with `options`.
std::unique_ptr<Model> load(const std::string& name, const gpu::DeviceOptions& options) {
  const size_t slash = name.find('/');
  const std::string set = slash == std::string::npos ? "" : name.substr(0, slash + 1);
  auto file = gguf::GgufFile::open(testing::testdata(set + "models/" + name.substr(set.size()) + ".gguf").string());
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return nullptr;
  auto model = Model::load(std::move(*file));
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return nullptr;
  auto device = gpu::Device::open(0, options);
  EXPECT_TRUE(device.ok()) << device.status().message();
  if (!device.ok()) return nullptr;
  EXPECT_EQ((*device)->uses_subgroups(), options.subgroups && (*device)->info().subgroup_arithmetic);
  auto placed = (*model)->offload(std::move(*device), 99, 0, kContext);
  EXPECT_TRUE(placed.ok()) << placed.status().message();
  if (!placed.ok()) return nullptr;
  EXPECT_EQ(placed->layers, (*model)->config().n_layer);
  return std::move(*model);
}

// Every row of logits of `tokens` from position 0.
std::vector<float> prompt_logits(Model& model, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  KvCache kv(model.config(), kContext);
  std::vector<float> logits;
  const Status s = model.forward(tokens, 0, kv, pool, true, logits);
  EXPECT_TRUE(s.ok()) << s.message();
  return logits;
}

float max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

class SharedMemoryBuild : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { REVIS_REQUIRE_GPU(); }
};

TEST_P(SharedMemoryBuild, LogitsAgreeWithTheSubgroupBuild) {
  const std::vector<int32_t> tokens = some_tokens(20, 1);
  auto on_shared = load(GetParam(), {.subgroups = false});
  auto on_subgroups = load(GetParam(), {.subgroups = true});
  ASSERT_TRUE(on_shared && on_subgroups);
  const std::vector<float> shared = prompt_logits(*on_shared, tokens);
  const std::vector<float> subgroups = prompt_logits(*on_subgroups, tokens);
  ASSERT_EQ(shared.size(), tokens.size() * on_shared->config().n_vocab);
  EXPECT_LT(max_difference(shared, subgroups), 1e-3f);
}

TEST_P(SharedMemoryBuild, ASequenceIsTheSameBitsAloneAndInABatch) {
  auto model = load(GetParam(), {.subgroups = false});
  ASSERT_TRUE(model);
  const std::vector<int32_t> first = some_tokens(12, 2), second = some_tokens(17, 3);
  const std::vector<float> alone = prompt_logits(*model, first);
  ThreadPool pool(2);
  KvCache kv_first(model->config(), kContext), kv_second(model->config(), kContext);
  std::vector<float> logits_first, logits_second;
  const Model::SequenceInput batch[] = {
      {.tokens = second, .kv = &kv_second, .all_logits = true, .logits = &logits_second},
      {.tokens = first, .kv = &kv_first, .all_logits = true, .logits = &logits_first},
  };
  const Status s = model->forward(batch, pool);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(logits_first.size(), alone.size());
  for (size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(logits_first[i], alone[i]) << "logit " << i;
}

INSTANTIATE_TEST_SUITE_P(Models, SharedMemoryBuild,
                         ::testing::Values("llama-spm-F16", "qwen3-Q4_K_M", "deepseek2/deepseek2-Q4_K_M"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

}  // namespace
}  // namespace revis
