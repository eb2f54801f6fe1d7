// `revis batch` end to end: real `revis serve` nodes (the simulated engine,
// and a small shared model), JSONL in, JSONL out.
#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "net/client.h"
#include "node/node_process.h"
#include "support/run_command.h"
#include "support/testdata.h"

namespace revis {
namespace {

using nlohmann::json;
using testing::NodeProcess;
using testing::run_revis;
using testing::shell_quote;
using testing::TempDir;
using namespace std::chrono_literals;

// Greedy and short, so a random-weight model runs its full 8 tokens.
const char* kTasks = R"(
[tasks.short]
tier = "small"
user = "{{text}}"
required = ["text"]
temperature = 0
max_tokens = 8
)";

std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

std::string short_ticket(int i, const std::string& id = "") {
  json t = {{"taskType", "short"}, {"args", {{"text", "item " + std::to_string(i)}}}};
  if (!id.empty()) t["ticketID"] = id;
  return t.dump() + "\n";
}

// A simulated node with the short task; `rate` tokens per second.
std::vector<std::string> sim_args(const std::string& catalog, const std::string& name, int rate) {
  return {"--engine", "sim", "--sim-tokens-per-s", std::to_string(rate), "--catalog", catalog, "--name", name};
}

std::string batch_command(const NodeProcess& node, const std::string& input, const std::string& output,
                          const std::string& extra = "") {
  return "batch " + shell_quote(input) + " --node 127.0.0.1:" + std::to_string(node.port()) + " -o " +
         shell_quote(output) + " " + extra;
}

TEST(Batch, ResultsKeepInputOrderAndFailedTicketsAreListed) {
  TempDir dir;
  NodeProcess node(sim_args(dir.write("tasks.toml", kTasks), "sim-a", 400));
  ASSERT_TRUE(node.wait_ready()) << node.log();
  std::string input;
  for (int i = 1; i <= 10; ++i) input += short_ticket(i, i % 3 == 0 ? "mine-" + std::to_string(i) : "");
  input += "\n";                                                                   // line 11: blank, skipped
  input += R"({"taskType": "short", "args": {}})" "\n";                            // line 12: missing_arg
  input += R"({"taskType": "nope", "args": {"text": "x"}, "ticketID": "bad-task"})" "\n";  // line 13: refused at once
  const std::string out = dir.file("results.jsonl");
  // Everything in flight at once, so the refusals come back first.
  auto r = run_revis(batch_command(node, dir.write("in.jsonl", input), out, "--concurrency 16"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("line 13 (ticket bad-task): unknown_task"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("line 12 (ticket "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missing_arg"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("2 failed"), std::string::npos) << r.err;

  // Line 13's refusal arrives before lines 1-10 finish; it is written last all the same.
  const std::vector<json> results = read_jsonl(out);
  ASSERT_EQ(results.size(), 12u);
  std::vector<int> lines;
  for (const json& res : results) lines.push_back(res["line"]);
  EXPECT_EQ(lines, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13}));
  for (int i = 0; i < 10; ++i) {
    const json& res = results[i];
    EXPECT_EQ(res["status"], "done") << res;
    EXPECT_EQ(res["taskType"], "short");
    if ((i + 1) % 3 == 0) {
      EXPECT_EQ(res["ticketID"], "mine-" + std::to_string(i + 1));
    }
    EXPECT_EQ(res["stats"]["engine"], "sim") << res;
    EXPECT_EQ(res["stats"]["node"], "sim-a");
    EXPECT_EQ(res["stats"]["generatedTokens"], 8);
    EXPECT_FALSE(res["text"].get<std::string>().empty());
  }
  EXPECT_EQ(results[10]["status"], "error");
  EXPECT_EQ(results[10]["code"], "missing_arg");
  EXPECT_EQ(results[11]["code"], "unknown_task");
  EXPECT_EQ(results[11]["ticketID"], "bad-task");
  // Each done ticket ran exactly once.
  EXPECT_EQ(node.status()["counters"]["byOutcome"]["ticket"]["done"], 10);
}

TEST(Batch, EveryTicketDoneExitsZeroWithASummary) {
  TempDir dir;
  NodeProcess node(sim_args(dir.write("tasks.toml", kTasks), "sim-b", 1000));
  ASSERT_TRUE(node.wait_ready()) << node.log();
  const json status = node.status();
  EXPECT_EQ(status["engine"], "sim");
  EXPECT_EQ(status["sim"]["tokensPerS"], 1000.0);
  bool small_simulated = false;
  for (const json& tier : status["tiers"]) small_simulated |= tier["name"] == "small" && tier["model"] == "sim";
  EXPECT_TRUE(small_simulated) << status;

  std::string input;
  for (int i = 1; i <= 30; ++i) input += short_ticket(i);
  const std::string out = dir.file("results.jsonl"), summary = dir.file("summary.json");
  auto r = run_revis(batch_command(node, dir.write("in.jsonl", input), out, "--summary " + shell_quote(summary)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("30/30"), std::string::npos) << r.err;  // the progress line's last state
  EXPECT_NE(r.err.find("overhead"), std::string::npos) << r.err;
  const std::vector<json> results = read_jsonl(out);
  ASSERT_EQ(results.size(), 30u);
  std::set<std::string> ids;
  for (const json& res : results) {
    EXPECT_EQ(res["status"], "done");
    EXPECT_EQ(res["attempts"], 1);
    ids.insert(res["ticketID"]);
  }
  EXPECT_EQ(ids.size(), 30u);
  std::ifstream in(summary);
  const json s = json::parse(in);
  EXPECT_EQ(s["done"], 30);
  EXPECT_EQ(s["failed"], 0);
  EXPECT_EQ(s["byNode"]["sim-b"], 30);
  EXPECT_EQ(s["unexpected"], 0);
  EXPECT_GT(s["latencyP50Ms"].get<double>(), 0);
  EXPECT_GT(s["computeMeanMs"].get<double>(), 0);
}

TEST(Batch, MalformedLinesAreListedAndNothingIsSent) {
  TempDir dir;
  NodeProcess node(sim_args(dir.write("tasks.toml", kTasks), "sim-c", 1000));
  ASSERT_TRUE(node.wait_ready()) << node.log();
  const std::string input = short_ticket(1, "same") +                        // 1
                            "{\"taskType\": \"short\", \"args\": {\n" +      // 2: not JSON
                            R"({"taskType": "short", "priority": 3})" "\n"   // 3: unknown field
                            R"({"taskType": "short", "args": {"n": 3}})" "\n"  // 4: a number argument
                            R"(["short"])" "\n"                              // 5: not an object
                            + short_ticket(6, "same") +                      // 6: duplicate ID
                            R"({"args": {"text": "x"}})" "\n";               // 7: no taskType
  auto r = run_revis(batch_command(node, dir.write("in.jsonl", input), dir.file("out.jsonl")));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  for (int line = 2; line <= 7; ++line)
    EXPECT_NE(r.err.find("in.jsonl:" + std::to_string(line) + ": "), std::string::npos) << line << "\n" << r.err;
  EXPECT_EQ(r.err.find("in.jsonl:1: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("already used on line 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing was sent"), std::string::npos) << r.err;
  EXPECT_EQ(node.status()["counters"]["executed"], 0);
}

TEST(Batch, TicketsInFlightAreSentAgainWhenTheNodeDies) {
  TempDir dir;
  const std::string tasks = dir.write("tasks.toml", kTasks);
  auto first = std::make_unique<NodeProcess>(sim_args(tasks, "first", 40));  // 8 tokens: ~0.2 s a ticket
  ASSERT_TRUE(first->wait_ready()) << first->log();
  const int port = first->port();
  std::string input;
  for (int i = 1; i <= 16; ++i) input += short_ticket(i);
  const std::string out = dir.file("results.jsonl");
  const std::string command = batch_command(*first, dir.write("in.jsonl", input), out, "--concurrency 4");
  testing::CommandResult r;
  std::thread batch([&] { r = run_revis(command); });

  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (first->status().value(json::json_pointer("/counters/executed"), 0) < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  first->signal(SIGKILL);
  first->wait_exit(10s);
  NodeProcess second(sim_args(tasks, "second", 400), port);
  const bool second_ready = second.wait_ready();
  batch.join();  // before any ASSERT: a joinable thread must not be destroyed
  ASSERT_TRUE(second_ready) << second.log();

  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("lost"), std::string::npos) << r.err;
  const std::vector<json> results = read_jsonl(out);
  ASSERT_EQ(results.size(), 16u);
  int resent = 0, on_second = 0;
  std::set<std::string> ids;
  for (const json& res : results) {
    EXPECT_EQ(res["status"], "done") << res;
    ids.insert(res["ticketID"]);
    resent += res["attempts"].get<int>() > 1;
    on_second += res["stats"]["node"] == "second";
  }
  EXPECT_EQ(ids.size(), 16u);
  EXPECT_GE(resent, 1);
  EXPECT_GE(on_second, 1);
}

TEST(Batch, RunsOnARealModel) {
  TempDir dir;
  NodeProcess node({"-m", testing::testdata("models/qwen2-Q8_0.gguf").string(), "-t", "1", "-c", "256", "--catalog",
                    dir.write("tasks.toml", kTasks), "--name", "real"});
  ASSERT_TRUE(node.wait_ready()) << node.log();
  std::string input;
  for (int i = 1; i <= 6; ++i) input += short_ticket(i);
  const std::string out = dir.file("results.jsonl");
  auto r = run_revis(batch_command(node, dir.write("in.jsonl", input), out, "--concurrency 3"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> results = read_jsonl(out);
  ASSERT_EQ(results.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(results[i]["line"], i + 1);
    EXPECT_EQ(results[i]["status"], "done") << results[i];
    EXPECT_EQ(results[i]["stats"]["engine"], "gguf");
    EXPECT_EQ(results[i]["stats"]["model"], "qwen2-Q8_0.gguf");
    EXPECT_GE(results[i]["stats"]["generatedTokens"].get<int>(), 1);
  }
}

TEST(Batch, AnUnreachableNodeFailsEveryTicket) {
  TempDir dir;
  // A port nothing listens on: bound by a node that has since stopped.
  int port = 0;
  {
    NodeProcess gone(sim_args(dir.write("tasks.toml", kTasks), "gone", 1000));
    ASSERT_TRUE(gone.wait_ready()) << gone.log();
    port = gone.port();
  }
  const std::string input = short_ticket(1) + short_ticket(2);
  auto r = run_revis("batch " + shell_quote(dir.write("in.jsonl", input)) + " --node 127.0.0.1:" + std::to_string(port) +
                     " --retries 1 -o " + shell_quote(dir.file("out.jsonl")));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("line 2 (ticket "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unreachable"), std::string::npos) << r.err;
  EXPECT_EQ(read_jsonl(dir.file("out.jsonl")).size(), 2u);
}

TEST(Batch, TheSimulatedEngineRunsNoModel) {
  auto r = run_revis("serve --engine sim -m model.gguf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("engine sim runs no model"), std::string::npos) << r.err;
  r = run_revis("serve --engine quantum");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("engine \"quantum\""), std::string::npos) << r.err;
}

}  // namespace
}  // namespace revis
