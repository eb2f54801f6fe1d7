// The KV store through the command line: `revis run --kv-dir` resumes a
// prompt across process restarts with the same logits, and `revis kv`
// lists, collects and removes checkpoints.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/run_command.h"

namespace revis {
namespace {

using testing::run_revis;
using testing::shell_quote;
using testing::TempDir;

const std::string kText =
    "The lighthouse keeper climbed the spiral stairs every evening, counting the steps as his father had taught "
    "him, and at the top he wound the clockwork that turned the great lens. Ships far out on the grey water "
    "watched for the beam sweeping across the waves, and the fishermen of the village said that as long as the "
    "light turned, the sea would let them come home. One winter the storms lasted for weeks";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

struct KvCli : ::testing::Test {
  TempDir tmp;
  std::string model = testing::testdata("models/qwen3-Q4_K_M.gguf").string();
  std::string kv_dir = tmp.file("kv");

  nlohmann::json run(const std::string& text, const std::string& logits_file) {
    std::ofstream(tmp.file("prompt.txt")) << text;
    const auto r = run_revis("run -m " + shell_quote(model) + " -f " + shell_quote(tmp.file("prompt.txt")) +
                             " -n 6 --temp 0 -t 2 --json --kv-dir " + shell_quote(kv_dir) +
                             (logits_file.empty() ? "" : " --logits-out " + shell_quote(tmp.file(logits_file))));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
  }
  nlohmann::json ls() {
    const auto r = run_revis("kv ls --json --kv-dir " + shell_quote(kv_dir));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
  }

  // `revis run` twice: the second process resumes from the first one's
  // checkpoint, with its logits bit for bit.
  void expect_second_process_resumes();
};

TEST_F(KvCli, ASecondProcessResumesWithTheSameLogits) { expect_second_process_resumes(); }

// A model with recurrent layers (qwen35): its checkpoint holds the
// recurrent state after the prompt beside the attention rows.
TEST_F(KvCli, AHybridModelResumesInASecondProcess) {
  model = REVIS_REPO_TESTDATA_DIR "qwen35/models/qwen35-Q8_0.gguf";
  expect_second_process_resumes();
}

void KvCli::expect_second_process_resumes() {
  const nlohmann::json first = run(kText, "cold.json");
  const int n_prompt = first["prompt_tokens"];
  ASSERT_GT(n_prompt, 64) << "the prompt must be long enough to be saved";
  EXPECT_EQ(first["cached_tokens"], 0);

  const nlohmann::json second = run(kText, "resumed.json");
  EXPECT_EQ(second["cached_tokens"], n_prompt);
  EXPECT_EQ(second["cache_source"], "disk");
  EXPECT_EQ(second["text"], first["text"]);

  const nlohmann::json cold = read_json(tmp.file("cold.json")), resumed = read_json(tmp.file("resumed.json"));
  EXPECT_EQ(cold["first_logits_position"], 0);
  EXPECT_EQ(resumed["first_logits_position"], n_prompt - 1);
  ASSERT_EQ(resumed["prompt_logits"].size(), 1u) << "only the row after the last prompt token";
  // "%.9g" round-trips float32, so equal text means equal bits.
  EXPECT_EQ(resumed["prompt_logits"][0], cold["prompt_logits"][n_prompt - 1]);
  EXPECT_EQ(resumed["greedy"], cold["greedy"]);
  EXPECT_EQ(resumed["greedy_logits"], cold["greedy_logits"]);

  // A longer prompt starting the same way resumes from every shared token:
  // the whole first prompt, or all but its last token where the new text
  // tokenizes across the join.
  const nlohmann::json longer = run(kText + ", and the keeper ran out of oil.", "");
  EXPECT_GE(longer["cached_tokens"].get<int>(), n_prompt - 1);
  EXPECT_LE(longer["cached_tokens"].get<int>(), n_prompt);
}

TEST_F(KvCli, ListCollectRemove) {
  run(kText, "");
  run(kText + " and the lamp went dark.", "");
  nlohmann::json listing = ls();
  ASSERT_EQ(listing["files"].size(), 2u) << listing.dump();
  const nlohmann::json& f = listing["files"][0];
  EXPECT_GT(f["tokens"].get<int>(), 64);
  EXPECT_GT(f["bytes_per_token"].get<double>(), 0);
  EXPECT_EQ(f["model"].get<std::string>().size(), 16u);

  // Leftovers of an interrupted write and a damaged file go at gc.
  std::ofstream(kv_dir + "/.half-written.rkv.2147483646.0.part") << "x";  // no such process
  std::ofstream(kv_dir + "/.being-written.rkv." + std::to_string(::getpid()) + ".0.part") << "x";
  std::ofstream(kv_dir + "/damaged.rkv") << "RVKVCKPT";
  auto r = run_revis("kv gc --kv-dir " + shell_quote(kv_dir));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("unfinished write"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("damaged"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("being-written"), std::string::npos) << "its writer is alive: " << r.out;
  listing = ls();
  EXPECT_EQ(listing["files"].size(), 2u);
  EXPECT_TRUE(listing["damaged"].empty());

  // A budget for the smaller file keeps one at most.
  const uint64_t smallest = std::min(listing["files"][0]["bytes"].get<uint64_t>(),
                                     listing["files"][1]["bytes"].get<uint64_t>());
  ASSERT_EQ(run_revis("kv gc --kv-budget " + std::to_string((smallest + 1) / 1048576.0) + " --kv-dir " +
                      shell_quote(kv_dir)).exit_code, 0);
  listing = ls();
  EXPECT_LE(listing["files"].size(), 1u);

  r = run_revis("kv rm --all --kv-dir " + shell_quote(kv_dir));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(ls()["files"].empty());
  r = run_revis("kv rm nothing.rkv --kv-dir " + shell_quote(kv_dir));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no such checkpoint"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace revis
