// The GPU from the command line: revis devices, run with --device vulkan
// and llama.cpp's -ngl, bench --json naming the device, and a device name
// revis does not know.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpu_test_device.h"
#include "support/run_command.h"
#include "support/testdata.h"

namespace revis {
namespace {

using testing::run_revis;
using testing::shell_quote;

std::string shared_model(const std::string& stem) {
  return shell_quote(testing::testdata("models/" + stem + ".gguf").string());
}

TEST(GpuCli, DevicesListsWhatVulkanSees) {
  REVIS_REQUIRE_GPU();
  auto r = run_revis("devices --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array() && !j.empty());
  EXPECT_EQ(j[0]["device"], "vulkan:0");
  EXPECT_FALSE(j[0]["name"].get<std::string>().empty());
  EXPECT_GT(j[0]["memory_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(j[0]["subgroup_arithmetic"], gpu::list_devices()->front().subgroup_arithmetic);
}

// The wiring: the layers go where the flags say and text comes out (the
// golden tests judge the numbers).
TEST(GpuCli, RunPlacesLayersAsNglSays) {
  REVIS_REQUIRE_GPU();
  const std::string common = "run -m " + shared_model("llama-spm-Q8_0") + " -p 'Hello world' -n 12 --temp 0 --seed 1";
  auto all = run_revis(common + " --device vulkan -ngl 99");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.err.find("runs 2 of 2 layers"), std::string::npos) << all.err;
  EXPECT_NE(all.err.find("generated 12 tokens"), std::string::npos) << all.err;
  auto split = run_revis(common + " --device vulkan -ngl 1");
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_NE(split.err.find("runs 1 of 2 layers"), std::string::npos) << split.err;
  auto cpu = run_revis(common);
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(cpu.err.find("GPU"), std::string::npos) << cpu.err;
}

TEST(GpuCli, BenchJsonNamesTheDevice) {
  REVIS_REQUIRE_GPU();
  auto r = run_revis("bench -m " + shared_model("qwen3-Q4_K_M") + " --device vulkan -p 16 -n 4 -r 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const std::string device = j["device"];
  EXPECT_EQ(device, gpu::list_devices()->front().name);
  EXPECT_EQ(j["gpu_layers"], 2);
}

TEST(GpuCli, AnUnknownDeviceIsAUsageClearError) {
  auto r = run_revis("run -m " + shared_model("llama-spm-Q8_0") + " -p hi -n 1 --device metal");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("expected cpu, vulkan or vulkan:N"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace revis
