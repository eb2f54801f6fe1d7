// The cluster feed ({"type":"subscribe","feed":"cluster"}, fabric/
// cluster_feed.h) of two simulated nodes that are each other's peers: the
// catalogue, the view of both nodes, the updates of a ticket another client
// sends, and a killed peer shown down within the heartbeat timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "fabric/cluster.h"

namespace revis {
namespace {

using nlohmann::json;
using testing::NodeProcess;
using namespace std::chrono_literals;

// Reads feed events until `match` holds for one (returned) or the time is
// up (null).
json next_matching(node::WsClient& ws, const std::function<bool(const json&)>& match, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto text = ws.receive(500);
    if (!text.ok()) {
      if (text.status().message().find("timeout") != std::string::npos) continue;
      return nullptr;
    }
    json event = json::parse(*text);
    if (match(event)) return event;
  }
  return nullptr;
}

const json* node_named(const json& cluster_event, const std::string& name) {
  for (const json& n : cluster_event["view"]["nodes"])
    if (n["name"] == name) return &n;
  return nullptr;
}

TEST(ClusterFeed, StreamsNodesAndTicketsOfTwoSimulatedNodes) {
  const int ports[2] = {testing::free_port(), testing::free_port()};
  auto start = [&](int i) {
    return std::make_unique<NodeProcess>(
        std::vector<std::string>{"--engine", "sim", "--sim-tokens-per-s", "400", "--name", i == 0 ? "a" : "b", "--token", "t0k",
                                 "--heartbeat-ms", "200", "--peer", "127.0.0.1:" + std::to_string(ports[1 - i])},
        ports[i]);
  };
  auto a = start(0), b = start(1);
  ASSERT_TRUE(a->wait_ready()) << a->log();
  ASSERT_TRUE(b->wait_ready()) << b->log();

  auto feed = node::WsClient::connect(a->endpoint(), "/v1/revis/stream", "t0k", 10000);
  ASSERT_TRUE(feed.ok()) << feed.status().message();
  ASSERT_TRUE((*feed)->send(R"({"type":"subscribe","feed":"cluster"})").ok());
  const json catalog = next_matching(**feed, [](const json& e) { return e["type"] == "catalog"; }, 5s);
  ASSERT_TRUE(catalog.is_object());
  EXPECT_TRUE(catalog["digest"].get<std::string>().starts_with("sha256:"));
  ASSERT_TRUE(catalog["tasks"].contains("translate")) << catalog.dump();
  EXPECT_FALSE(catalog["tasks"]["translate"]["description"].get<std::string>().empty());

  // Both nodes, b with its link up and the same catalogue.
  const json both = next_matching(**feed, [](const json& e) {
    const json* peer = e["type"] == "cluster" ? node_named(e, "b") : nullptr;
    return peer && (*peer)["link"] == "up";
  }, 10s);
  ASSERT_TRUE(both.is_object()) << a->log();
  EXPECT_TRUE((*node_named(both, "a"))["self"].get<bool>());
  EXPECT_TRUE((*node_named(both, "b"))["catalogMatches"].get<bool>());

  // A ticket from another client: queued or running, then done, on a node,
  // with its figures.
  auto client = node::WsClient::connect(a->endpoint(), "/v1/revis/stream", "t0k", 10000);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->send(R"({"type":"ticket","ticketID":"feed-1","taskType":"chat","args":{"message":"hi"}})").ok());
  const json seen = next_matching(**feed, [](const json& e) { return e["type"] == "ticketUpdate" && e["ticket"]["ticketID"] == "feed-1"; }, 5s);
  ASSERT_TRUE(seen.is_object());
  EXPECT_EQ(seen["ticket"]["taskType"], "chat");
  EXPECT_TRUE(seen["ticket"]["state"] == "queued" || seen["ticket"]["state"] == "running") << seen.dump();
  const json done = next_matching(**feed, [](const json& e) {
    return e["type"] == "ticketUpdate" && e["ticket"]["ticketID"] == "feed-1" && e["ticket"]["state"] == "done";
  }, 30s);
  ASSERT_TRUE(done.is_object());
  const json& t = done["ticket"];
  EXPECT_TRUE(t["node"] == "a" || t["node"] == "b") << t.dump();
  EXPECT_GT(t["tokens"].get<int>(), 0);
  EXPECT_GT(t["tokPerSec"].get<double>(), 0);
  EXPECT_GE(t["durationMs"].get<double>(), t["ttftMs"].get<double>());

  // A new subscriber hears the finished ticket too.
  auto late = node::WsClient::connect(a->endpoint(), "/v1/revis/stream", "t0k", 10000);
  ASSERT_TRUE(late.ok());
  ASSERT_TRUE((*late)->send(R"({"type":"subscribe","feed":"cluster"})").ok());
  EXPECT_TRUE(next_matching(**late, [](const json& e) {
    return e["type"] == "ticketUpdate" && e["ticket"]["ticketID"] == "feed-1" && e["ticket"]["state"] == "done";
  }, 5s).is_object());

  // b killed: its card is down within the heartbeat timeout (3 x 200 ms),
  // well before this test's bound.
  kill(b->pid(), SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const json down = next_matching(**feed, [](const json& e) {
    const json* peer = e["type"] == "cluster" ? node_named(e, "b") : nullptr;
    return e["type"] == "cluster" && (!peer || (*peer)["link"] == "down");
  }, 5s);
  ASSERT_TRUE(down.is_object());
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 3s);
}

TEST(ClusterFeed, SubscribeMessageIsParsedStrictly) {
  NodeProcess a({"--engine", "sim"});
  ASSERT_TRUE(a.wait_ready()) << a.log();
  auto ws = node::WsClient::connect(a.endpoint(), "/v1/revis/stream", "", 10000);
  ASSERT_TRUE(ws.ok());
  ASSERT_TRUE((*ws)->send(R"({"type":"subscribe","feed":"everything"})").ok());
  auto answer = (*ws)->receive(5000);
  ASSERT_TRUE(answer.ok());
  const json error = json::parse(*answer);
  EXPECT_EQ(error["type"], "error");
  EXPECT_EQ(error["code"], "bad_request");
  EXPECT_NE(error["message"].get<std::string>().find("feed"), std::string::npos);
}

}  // namespace
}  // namespace revis
