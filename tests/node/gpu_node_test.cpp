// A node whose model runs on the GPU (lavapipe on CI): it answers, and its
// status, metrics and peer state name the device and the layers it holds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpu/device.h"
#include "net/client.h"
#include "node/node_process.h"
#include "support/testdata.h"

namespace revis {
namespace {

using nlohmann::json;

TEST(GpuNode, ServesFromTheDeviceAndSaysSo) {
  if (!gpu::built_with_vulkan()) GTEST_SKIP() << "built without Vulkan";
  auto devices = gpu::list_devices();
  ASSERT_TRUE(devices.ok() && !devices->empty()) << "Vulkan sees no device (install mesa-vulkan-drivers)";
  const std::string model = testing::testdata("models/qwen2-Q8_0.gguf").string();
  testing::NodeProcess node({"-m", model, "--device", "vulkan:0", "-ngl", "99", "-t", "2", "--parallel", "2"});
  ASSERT_TRUE(node.wait_ready()) << node.log();

  const json body = {{"model", "default"}, {"prompt", "Rivers run"}, {"max_tokens", 6}, {"temperature", 0}};
  auto answer = node::http_request(node.endpoint(), "POST", "/v1/completions", body.dump(),
                                   {{"Content-Type", "application/json"}}, 60000);
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  ASSERT_EQ(answer->status, 200) << answer->body;
  EXPECT_EQ(json::parse(answer->body)["usage"]["completion_tokens"], 6);

  auto status = node::http_request(node.endpoint(), "GET", "/v1/revis/status", "", {}, 10000);
  ASSERT_TRUE(status.ok());
  const json tier = json::parse(status->body)["tiers"][0];
  EXPECT_EQ(tier["device"], devices->front().name);
  EXPECT_EQ(tier["gpuLayers"], 2);
  EXPECT_GT(tier["deviceBytes"].get<uint64_t>(), 0u);

  auto metrics = node::http_request(node.endpoint(), "GET", "/metrics", "", {}, 10000);
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("revis_gpu_layers 2"), std::string::npos) << metrics->body;
  EXPECT_NE(node.log().find("GPU " + devices->front().name + " runs 2 of 2 layers"), std::string::npos) << node.log();
}

TEST(GpuNode, AnUnknownDeviceIsRefusedAtStart) {
  testing::NodeProcess node({"-m", testing::testdata("models/qwen2-Q8_0.gguf").string(), "--device", "cuda:0"});
  EXPECT_FALSE(node.wait_ready());
  EXPECT_NE(node.log().find("expected cpu, vulkan or vulkan:N"), std::string::npos) << node.log();
}

}  // namespace
}  // namespace revis
