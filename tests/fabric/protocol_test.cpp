// The fabric's additions to the ticket protocol and the node configuration:
// resume, subscribe and forwardedBy messages, the retry event, and the
// peers / max_attempts / heartbeat / journal keys.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "node/config.h"
#include "protocol/ticket.h"

namespace revis::node {
namespace {

ClientMessage parsed(const std::string& text) {
  auto r = parse_client_message(text, 4096);
  if (auto* rejected = std::get_if<RejectedMessage>(&r)) ADD_FAILURE() << text << ": " << rejected->error.message;
  return std::get<ClientMessage>(r);
}

std::string refusal(const std::string& text) {
  auto r = parse_client_message(text, 4096);
  auto* rejected = std::get_if<RejectedMessage>(&r);
  return rejected ? rejected->error.message : "";
}

TEST(FabricProtocol, ResumeSubscribeAndForwardedTickets) {
  auto resume = std::get<ResumeRequest>(parsed(R"({"type":"resume","ticketID":"t1","attempt":2,"afterSeq":41})"));
  EXPECT_EQ(resume.id, "t1");
  EXPECT_EQ(resume.attempt, 2);
  EXPECT_EQ(resume.after_seq, 41);
  auto bare = std::get<ResumeRequest>(parsed(R"({"type":"resume","ticketID":"t1"})"));
  EXPECT_EQ(bare.attempt, 0);
  EXPECT_EQ(bare.after_seq, -1) << "nothing seen";
  EXPECT_NE(refusal(R"({"type":"resume","ticketID":"t1","afterSeq":-2})").find("afterSeq"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"resume","ticketID":"t1","attempt":"1"})").find("attempt"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"resume","ticketID":"t1","from":3})").find("from"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"resume"})").find("ticketID"), std::string::npos);

  EXPECT_EQ(std::get<SubscribeRequest>(parsed(R"({"type":"subscribe","node":"b"})")).node, "b");
  EXPECT_NE(refusal(R"({"type":"subscribe","node":3})").find("node"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"subscribe","ticketID":"x"})").find("ticketID"), std::string::npos);

  auto t = std::get<Ticket>(parsed(R"({"type":"ticket","ticketID":"t2","taskType":"chat","forwardedBy":"a"})"));
  EXPECT_EQ(t.forwarded_by, "a");
  EXPECT_FALSE(std::get<Ticket>(parsed(R"({"type":"ticket","ticketID":"t3","taskType":"chat"})")).forwarded_by);
  EXPECT_NE(refusal(R"({"type":"ticket","ticketID":"t4","taskType":"chat","forwardedBy":true})").find("forwardedBy"),
            std::string::npos);
}

TEST(FabricProtocol, RetryEvent) {
  auto e = nlohmann::json::parse(retry_event("t1", 2, "node b was lost").text());
  EXPECT_EQ(e["type"], "retry");
  EXPECT_EQ(e["ticketID"], "t1");
  EXPECT_EQ(e["attempt"], 2);
  EXPECT_EQ(e["reason"], "node b was lost");
}

TEST(FabricConfig, PeersAndFailureSettings) {
  auto c = parse_config("model = \"m.gguf\"\npeers = [\"10.0.0.2:8080\", \"[::1]:9000\"]\nmax_attempts = 5\n"
                        "heartbeat_ms = 250\njournal = \"state/node.journal\"\nresult_ttl_s = 60\nresume_window_ms = 0\n",
                        "node.toml", "/etc/revis");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->peers, (std::vector<std::string>{"10.0.0.2:8080", "[::1]:9000"}));
  EXPECT_EQ(c->max_attempts, 5);
  EXPECT_EQ(c->heartbeat_ms, 250);
  EXPECT_EQ(c->journal, "/etc/revis/state/node.journal") << "relative to the file";
  EXPECT_EQ(c->result_ttl_s, 60);
  EXPECT_EQ(c->resume_window_ms, 0);

  ConfigOverrides o;
  o.peers = {"10.0.0.3:8080"};
  o.max_attempts = 2;
  ASSERT_TRUE(apply_overrides(*c, o).ok());
  EXPECT_EQ(c->peers.size(), 3u) << "--peer adds to the file's list";
  EXPECT_EQ(c->max_attempts, 2);

  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {"peers = \"10.0.0.2:8080\"", "peers"},
           {"peers = [\"a:1\", 2]", "peers[1]"},
           {"max_attempts = 0", "max_attempts"},
           {"heartbeat_ms = 5", "heartbeat_ms"},
           {"journal = 3", "journal"}}) {
    auto bad = parse_config(text, "node.toml", "");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(field), std::string::npos) << bad.status().message();
  }
}

}  // namespace
}  // namespace revis::node
