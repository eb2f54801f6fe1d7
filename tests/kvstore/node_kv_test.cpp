// The KV store in a node: a repeated prompt is resumed from RAM, a restarted
// node resumes it from the checkpoint its predecessor saved at shutdown, and
// results, the OpenAI usage and the status page say so.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "node/node_process.h"

namespace revis {
namespace {

using json = nlohmann::json;
using testing::NodeProcess;
using testing::TempDir;

const std::string kPrompt =
    "Notes from the harbour office. The ferry to the northern islands leaves at seven, weather permitting; the "
    "cargo boat on Tuesdays and Fridays; the mail goes with whichever sails first. Passengers must register at "
    "the office window before boarding, and dogs travel on deck. In winter the timetable changes without notice.";

json complete(const NodeProcess& node) {
  const json body = {{"prompt", kPrompt}, {"max_tokens", 4}, {"temperature", 0}};
  auto r = node::http_request(node.endpoint(), "POST", "/v1/completions", body.dump(), {}, 60000);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body);
}

TEST(NodeKv, ResumesFromRamThenFromDiskAfterARestart) {
  TempDir tmp;
  const std::string model = testing::testdata("models/qwen3-Q4_K_M.gguf").string();
  const std::string kv_dir = tmp.file("kv");
  std::string first_text;
  int n_prompt = 0;
  {
    NodeProcess node({"-m", model, "-t", "2", "--kv-dir", kv_dir});
    ASSERT_TRUE(node.wait_ready()) << node.log();
    const json cold = complete(node);
    n_prompt = cold["usage"]["prompt_tokens"];
    ASSERT_GT(n_prompt, 64) << "long enough to be checkpointed";
    EXPECT_EQ(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    first_text = cold["choices"][0]["text"];
    const json warm = complete(node);
    EXPECT_EQ(warm["usage"]["prompt_tokens_details"]["cached_tokens"], n_prompt) << "the whole prompt, from RAM";
    EXPECT_EQ(warm["choices"][0]["text"], first_text);
    EXPECT_EQ(node.stop(std::chrono::seconds(30)), 0) << node.log();  // shutdown saves what is only in RAM
  }
  NodeProcess node({"-m", model, "-t", "2", "--kv-dir", kv_dir});
  ASSERT_TRUE(node.wait_ready()) << node.log();
  const json resumed = complete(node);
  EXPECT_EQ(resumed["usage"]["prompt_tokens_details"]["cached_tokens"], n_prompt) << "the whole prompt, from disk";
  EXPECT_EQ(resumed["choices"][0]["text"], first_text);

  auto status = node::http_request(node.endpoint(), "GET", "/v1/revis/status", "", {}, 10000);
  ASSERT_TRUE(status.ok());
  const json s = json::parse(status->body);
  bool listed = false;
  for (const json& tier : s["tiers"])
    if (tier.contains("kvPrefixes") && !tier["kvPrefixes"].empty()) {
      listed = true;
      EXPECT_EQ(tier["kvPrefixes"][0].get<std::string>().size(), 16u);
    }
  EXPECT_TRUE(listed) << s.dump();

  // One identity: the checkpoints are named after the digest the node reports.
  std::string digest;
  for (const json& tier : s["tiers"])
    if (tier["digest"].is_string()) digest = tier["digest"];
  ASSERT_EQ(digest.rfind("sha256:", 0), 0u) << digest;
  int checkpoints = 0;
  for (const auto& file : std::filesystem::directory_iterator(kv_dir))
    if (file.path().extension() == ".rkv") {
      ++checkpoints;
      EXPECT_EQ(file.path().filename().string().substr(0, 16), digest.substr(7, 16)) << file.path();
    }
  EXPECT_GT(checkpoints, 0);
}

}  // namespace
}  // namespace revis
