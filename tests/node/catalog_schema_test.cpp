// Catalogue tasks that promise the shape of their answer (`schema`,
// `grammar`), end to end on a real node with a random-weight model: every
// ticket's answer, streamed or not, is JSON that validates against the
// task's schema, or a sentence of its grammar.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "net/client.h"
#include "node/node_process.h"
#include "support/json_schema_check.h"
#include "support/testdata.h"

namespace revis {
namespace {

using nlohmann::json;
using testing::NodeProcess;
using testing::TempDir;

const char* const kRatingSchema = R"({"type": "object", "properties": {
  "stars": {"type": "integer", "minimum": 1, "maximum": 5},
  "verdict": {"enum": ["buy", "skip"]},
  "reasons": {"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 1, "maxItems": 3}},
  "required": ["stars", "verdict", "reasons"]})";

class ShapedTasks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    std::ofstream(dir_->file("tasks.toml")) << "[tasks.rate]\ntier = \"small\"\nuser = \"Rate this: {{text}}\"\n"
                                            << "required = [\"text\"]\ntemperature = 1.0\nmax_tokens = 200\n"
                                            << "schema = '''" << kRatingSchema << "'''\n"
                                            << "[tasks.yes_no]\ntier = \"small\"\nuser = \"{{q}}\"\nrequired = [\"q\"]\n"
                                            << "temperature = 1.0\ngrammar = 'root ::= \"yes\" | \"no\"'\n"
                                            // The built-in profile task, on the one tier this node has.
                                            << "[tasks.profile]\ntier = \"small\"\nmax_tokens = 400\n";
    node_ = new NodeProcess({"--tier", "small=" + testing::testdata("models/qwen2-Q8_0.gguf").string(), "--catalog",
                             dir_->file("tasks.toml"), "-t", "2", "-c", "2048"});
    ASSERT_TRUE(node_->wait_ready()) << node_->log();
  }
  static void TearDownTestSuite() {
    delete node_;
    delete dir_;
    node_ = nullptr;
    dir_ = nullptr;
  }

  // The ticket's events up to its terminal one; the last is that one.
  static std::vector<json> run_shaped(const std::string& id, const std::string& task, const json& args, bool streaming) {
    auto ws = node::WsClient::connect(node_->endpoint(), "/v1/revis/stream", "", 10000);
    if (!ws.ok()) throw std::runtime_error(ws.status().message());
    const json ticket = {{"type", "ticket"}, {"ticketID", id}, {"taskType", task}, {"isStreaming", streaming}, {"args", args}};
    if (Status s = (*ws)->send(ticket.dump()); !s.ok()) throw std::runtime_error(s.message());
    std::vector<json> events;
    while (true) {
      auto m = (*ws)->receive(120000);
      if (!m.ok()) throw std::runtime_error(m.status().message());
      events.push_back(json::parse(*m));
      const json& e = events.back();
      if ((e["type"] == "done" || e["type"] == "error") && e["ticketID"] == id) return events;
    }
  }
  static TempDir* dir_;
  static NodeProcess* node_;
};
TempDir* ShapedTasks::dir_ = nullptr;
NodeProcess* ShapedTasks::node_ = nullptr;

TEST_F(ShapedTasks, EveryAnswerValidatesAgainstTheTasksSchema) {
  const json schema = json::parse(kRatingSchema);
  for (int i = 0; i < 6; ++i) {
    const bool streaming = i % 2 == 1;
    const std::string id = "rate-" + std::to_string(i);
    const std::vector<json> events = run_shaped(id, "rate", {{"text", "a kettle, ticket " + std::to_string(i)}}, streaming);
    const json& done = events.back();
    ASSERT_EQ(done["type"], "done") << done.dump();
    const std::string text = done["text"];
    const json answer = json::parse(text, nullptr, false);
    ASSERT_FALSE(answer.is_discarded()) << "not JSON: " << text;
    std::string why;
    EXPECT_TRUE(testing::schema_accepts(answer, schema, schema, &why)) << why;
    if (streaming) {
      std::string streamed;
      for (const json& e : events)
        if (e["type"] == "token") streamed += e["text"].get<std::string>();
      EXPECT_EQ(streamed, text);
    }
  }
}

TEST_F(ShapedTasks, AGrammarTaskAnswersInItsLanguage) {
  for (int i = 0; i < 4; ++i) {
    const json done = run_shaped("yn-" + std::to_string(i), "yes_no", {{"q", "Is water wet?"}}, false).back();
    ASSERT_EQ(done["type"], "done") << done.dump();
    EXPECT_TRUE(done["text"] == "yes" || done["text"] == "no") << done["text"];
  }
}

TEST_F(ShapedTasks, TheBuiltInProfileIsAlwaysItsJsonObject) {
  const json done = run_shaped("profile-1", "profile", {{"text", "Ada Lovelace, mathematician, London."}}, false).back();
  ASSERT_EQ(done["type"], "done") << done.dump();
  const json profile = json::parse(done["text"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(profile.is_object()) << done["text"];
  for (const char* key : {"name", "role", "organization", "location", "skills", "contact", "summary"})
    EXPECT_TRUE(profile.contains(key)) << key << " in " << profile.dump();
  EXPECT_TRUE(profile["skills"].is_array());
}

}  // namespace
}  // namespace revis
