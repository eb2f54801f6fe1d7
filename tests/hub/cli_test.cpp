// `revis pull`, `revis ls`, `revis rm` and -m ORG/REPO:QUANT end to end,
// the binary against a loopback hub serving a real (tiny) model.
#include <gtest/gtest.h>

#include <filesystem>

#include "fake_hub.h"
#include "support/run_command.h"
#include "support/terminal.h"

namespace revis {
namespace {

namespace fs = std::filesystem;
using testing::FakeHub;
using testing::run_revis;
using testing::shell_quote;
using testing::TempDir;

std::string model_bytes(const std::string& stem) {
  const auto b = testing::read_bytes(testing::testdata("models/" + stem + ".gguf"));
  return std::string(b.begin(), b.end());
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct HubCli {
  FakeHub hub;
  TempDir tmp;
  HubCli() {
    hub.add_file("test-org/Tiny-GGUF", "Tiny-Q8_0.gguf", model_bytes("llama-bpe-Q8_0"));
    hub.add_file("test-org/Tiny-GGUF", "Tiny-Q4_K_M.gguf", model_bytes("llama-bpe-Q4_K_M"));
  }
  std::string env() const { return "HF_ENDPOINT=" + hub.endpoint() + " REVIS_MODELS_DIR=" + shell_quote(tmp.file("models")); }
  testing::CommandResult revis(const std::string& args) const { return run_revis(args, env()); }
};

TEST(HubCli, PullListRemove) {
  HubCli h;
  auto r = h.revis("pull test-org/Tiny-GGUF:q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string file = h.tmp.file("models") + "/test-org/Tiny-GGUF/Tiny-Q8_0.gguf";
  EXPECT_EQ(r.out, file + "\n");
  EXPECT_TRUE(contains(r.err, "chose Q8_0: Tiny-Q8_0.gguf")) << r.err;
  EXPECT_TRUE(contains(r.err, "Tiny-Q8_0.gguf 100%")) << r.err;  // the progress line, not a terminal: plain lines
  EXPECT_TRUE(contains(r.err, "SHA-256 verified")) << r.err;
  EXPECT_EQ(testing::read_bytes(file), testing::read_bytes(testing::testdata("models/llama-bpe-Q8_0.gguf")));

  r = h.revis("ls");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "test-org/Tiny-GGUF:Q8_0")) << r.out;
  EXPECT_TRUE(contains(r.out, "Tiny-Q8_0.gguf")) << r.out;
  EXPECT_FALSE(contains(r.out, "Q4_K_M")) << r.out;

  r = h.revis("rm test-org/Tiny-GGUF:Q4_K_M");  // not pulled
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "has no GGUF matching \"Q4_K_M\"; it has: Q8_0 (Tiny-Q8_0)")) << r.err;
  r = h.revis("rm test-org/Tiny-GGUF:Q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "deleted " + file + "\n");
  EXPECT_FALSE(fs::exists(file));
  r = h.revis("ls");
  EXPECT_TRUE(contains(r.err, "no models in")) << r.err;

  r = h.revis("pull not-a-reference.gguf");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "expected ORG/REPO, ORG/REPO:QUANT or ORG/REPO:FILE.gguf")) << r.err;
}

TEST(HubCli, ATerminalGetsAProgressBar) {
  HubCli h;
  testing::Terminal term({"pull", "test-org/Tiny-GGUF:Q8_0"},
                         {{"HF_ENDPOINT", h.hub.endpoint()}, {"REVIS_MODELS_DIR", h.tmp.file("models")}});
  ASSERT_EQ(term.wait_exit(), 0) << term.output();
  EXPECT_TRUE(contains(term.output(), "\rTiny-Q8_0.gguf [" + std::string(30, '#') + "] 100% 1.8/1.8 MiB")) << term.output();
}

TEST(HubCli, RunTakesAReferenceAndPullsItOnce) {
  HubCli h;
  const std::string prompt = " -p 'The capital of France is' -n 8 --temp 0 -t 2";
  auto direct = run_revis("run -m " + shell_quote(testing::testdata("models/llama-bpe-Q8_0.gguf").string()) + prompt);
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  auto r = h.revis("run -m test-org/Tiny-GGUF:Q8_0" + prompt);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, direct.out);  // the Q8_0 file, not the Q4_K_M one
  EXPECT_TRUE(contains(r.err, "test-org/Tiny-GGUF:Q8_0 is not in")) << r.err;
  const size_t asked = h.hub.requests().size();
  // llama.cpp's -hf: the pulled file, with no request to the hub.
  r = h.revis("run -hf test-org/Tiny-GGUF:q8_0" + prompt);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, direct.out);
  EXPECT_EQ(h.hub.requests().size(), asked);
}

TEST(HubCli, AnUnreachableReferenceIsARuntimeError) {
  HubCli h;
  h.hub.force_status("/api/models/test-org/Private", 401);
  auto r = h.revis("run -m test-org/Private:Q8_0 -p hi -n 1");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "error: listing test-org/Private: HTTP 401")) << r.err;
  EXPECT_TRUE(contains(r.err, "HF_TOKEN")) << r.err;
  // A tier's model in the node's config goes the same way, not taken for a
  // path relative to the config file.
  const std::string config = h.tmp.write("node.toml", "[tiers.small]\nmodel = \"test-org/Private:Q8_0\"\n");
  r = h.revis("serve --config " + shell_quote(config) + " --port 0");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "error: tier small: model: listing test-org/Private: HTTP 401")) << r.err;
}

}  // namespace
}  // namespace revis
