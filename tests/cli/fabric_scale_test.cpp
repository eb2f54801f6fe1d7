// The fabric at small scale with the simulated engine, through `revis
// batch`: one accepting node with several simulated peers; every ticket ends
// with exactly one result, ran exactly once, the work is spread, and no node
// ever ran two at once. The full-size run (50 nodes, 2,000 tickets) is the
// benchmark scripts/bench-fabric-scale.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "net/client.h"
#include "node/node_process.h"
#include "support/run_command.h"
#include "support/testdata.h"

namespace revis {
namespace {

using nlohmann::json;
using testing::NodeProcess;
using testing::shell_quote;
using testing::TempDir;

constexpr int kPeers = 7;
constexpr int kTickets = 200;

std::vector<std::string> sim_node(const std::string& catalog, const std::string& name) {
  return {"--engine", "sim", "--sim-tokens-per-s", "500", "--catalog", catalog, "--name", name, "--queue-limit", "1000"};
}

TEST(FabricScale, EveryTicketEndsExactlyOnceAcrossSimulatedNodes) {
  TempDir dir;
  const std::string catalog = dir.file("tasks.toml");
  std::ofstream(catalog) << "[tasks.sim]\ntier = \"small\"\nuser = \"{{text}}\"\nrequired = [\"text\"]\nmax_tokens = 10\n";
  std::vector<std::unique_ptr<NodeProcess>> nodes;
  std::vector<std::string> accepting_args = sim_node(catalog, "sim-0");
  for (int i = 1; i <= kPeers; ++i) {
    nodes.push_back(std::make_unique<NodeProcess>(sim_node(catalog, "sim-" + std::to_string(i))));
    ASSERT_TRUE(nodes.back()->wait_ready()) << nodes.back()->log();
    accepting_args.push_back("--peer");
    accepting_args.push_back("127.0.0.1:" + std::to_string(nodes.back()->port()));
  }
  nodes.insert(nodes.begin(), std::make_unique<NodeProcess>(accepting_args));
  NodeProcess& accepting = *nodes.front();
  ASSERT_TRUE(accepting.wait_ready()) << accepting.log();

  const std::string input = dir.file("tickets.jsonl"), output = dir.file("results.jsonl");
  {
    std::ofstream in(input);
    for (int i = 1; i <= kTickets; ++i)
      in << json{{"taskType", "sim"}, {"args", {{"text", "ticket " + std::to_string(i)}}}, {"ticketID", "t" + std::to_string(i)}}.dump()
         << "\n";
  }
  auto r = testing::run_revis("batch " + shell_quote(input) + " --node 127.0.0.1:" + std::to_string(accepting.port()) +
                              " --concurrency 32 -o " + shell_quote(output));
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // Exactly one result per ticket, in input order, all done.
  std::ifstream in(output);
  std::vector<json> results;
  for (std::string line; std::getline(in, line);) results.push_back(json::parse(line));
  ASSERT_EQ(results.size(), static_cast<size_t>(kTickets));
  std::map<std::string, std::vector<std::pair<double, double>>> runs_by_node;  // node -> (started, finished)
  for (int i = 0; i < kTickets; ++i) {
    ASSERT_EQ(results[i]["ticketID"], "t" + std::to_string(i + 1));
    ASSERT_EQ(results[i]["status"], "done") << results[i];
    const json& stats = results[i]["stats"];
    EXPECT_EQ(stats["engine"], "sim");
    runs_by_node[stats["node"]].emplace_back(stats["startedMs"].get<double>(), stats["finishedMs"].get<double>());
  }

  // Each ticket ran exactly once: the nodes' own counts of jobs started add
  // up to the number of tickets, and each node ran what the results say.
  uint64_t executed = 0;
  for (const auto& node : nodes) {
    const json s = node->status();
    const std::string name = s["name"];
    executed += s["counters"]["executed"].get<uint64_t>();
    EXPECT_EQ(s["counters"]["executed"].get<size_t>(), runs_by_node[name].size()) << name;
  }
  EXPECT_EQ(executed, static_cast<uint64_t>(kTickets));

  // The work was spread, and no node ever ran two at once (its own clock).
  EXPECT_GE(runs_by_node.size(), static_cast<size_t>(kPeers + 1) / 2) << r.err;
  for (auto& [name, runs] : runs_by_node) {
    std::sort(runs.begin(), runs.end());
    for (size_t k = 1; k < runs.size(); ++k)
      EXPECT_GE(runs[k].first, runs[k - 1].second) << name << " ran two tickets at once";
  }
}

}  // namespace
}  // namespace revis
