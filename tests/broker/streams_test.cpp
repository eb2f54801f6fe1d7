// The wire contract against a real nats-server: streams and consumers are
// created or verified (never changed), tickets are deduplicated by
// Nats-Msg-Id, and a pulled ticket is redelivered, terminated or acked as
// docs/scale-out.md says.
#include "broker/streams.h"

#include <gtest/gtest.h>

#include <thread>

#include "broker/nats_server.h"
#include "broker/pull.h"

namespace revis::broker {
namespace {

using testing::NatsServer;

std::unique_ptr<Connection> connect_to(const NatsServer& server) {
  BrokerOptions o;
  o.servers = server.url();
  o.name = "streams-test";
  auto conn = Connection::connect(o);
  EXPECT_TRUE(conn.ok()) << conn.status().message();
  return conn.ok() ? std::move(*conn) : nullptr;
}

// A fresh nats-server and a connection to it, the streams created.
class BrokerStreamsOnServer : public ::testing::Test {
 protected:
  void SetUp() override {
    REVIS_REQUIRE_NATS_SERVER();
    server_ = std::make_unique<NatsServer>();
    conn_ = connect_to(*server_);
    ASSERT_TRUE(conn_);
    auto recorded = ensure_streams(*conn_, {});
    ASSERT_TRUE(recorded.ok()) << recorded.status().message();
    EXPECT_EQ(*recorded, "");
  }
  std::unique_ptr<NatsServer> server_;
  std::unique_ptr<Connection> conn_;
};

TEST(BrokerStreams, ServerListIsParsedAndBadOnesAreNamed) {
  auto urls = parse_server_list("127.0.0.1:4222, nats://h2:4223");
  ASSERT_TRUE(urls.ok()) << urls.status().message();
  EXPECT_EQ(*urls, (std::vector<std::string>{"nats://127.0.0.1:4222", "nats://h2:4223"}));
  EXPECT_FALSE(parse_server_list(" , ").ok());
  auto bad = parse_server_list("nats://");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("HOST:PORT"), std::string::npos);
}

TEST(BrokerStreams, UnreachableServerIsANamedError) {
  BrokerOptions o;
  o.servers = "127.0.0.1:" + std::to_string(testing::free_port());
  o.timeout_ms = 500;
  auto conn = Connection::connect(o);
  ASSERT_FALSE(conn.ok());
  EXPECT_NE(conn.status().message().find(o.servers), std::string::npos) << conn.status().message();
}

TEST_F(BrokerStreamsOnServer, CreatedOnceThenVerifiedAndCatalogueRecordedOnce) {
  auto again = ensure_streams(*conn_, {});
  ASSERT_TRUE(again.ok()) << again.status().message();
  auto first = record_catalog(*conn_, "sha256:aaa");
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(*first, "sha256:aaa");
  auto second = record_catalog(*conn_, "sha256:bbb");  // a later node does not overwrite it
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(*second, "sha256:aaa");
  auto verified = ensure_streams(*conn_, {});
  ASSERT_TRUE(verified.ok()) << verified.status().message();
  EXPECT_EQ(*verified, "sha256:aaa");
}

TEST_F(BrokerStreamsOnServer, MismatchedStreamIsAnErrorAndStaysAsItWas) {
  StreamSettings other;
  other.duplicate_window_ms = 60000;
  auto r = ensure_streams(*conn_, other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("REVIS_TICKETS"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("duplicate window 600000 ms, expected 60000 ms"), std::string::npos)
      << r.status().message();
  other = {};
  other.results_max_age_ms = 1000;
  r = ensure_streams(*conn_, other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("REVIS_RESULTS"), std::string::npos) << r.status().message();
  EXPECT_TRUE(ensure_streams(*conn_, {}).ok());  // unchanged
}

TEST_F(BrokerStreamsOnServer, MismatchedConsumerIsAnError) {
  ConsumerSettings s;
  ASSERT_TRUE(ensure_consumer(*conn_, "chat.completions", s).ok());
  EXPECT_TRUE(ensure_consumer(*conn_, "chat.completions", s).ok());
  s.ack_wait_ms = 1000;
  Status bad = ensure_consumer(*conn_, "chat.completions", s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("consumer chat_completions"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("ack wait 30000 ms, expected 1000 ms"), std::string::npos) << bad.message();
  EXPECT_FALSE(ensure_consumer(*conn_, "a b", {}).ok());
}

TEST_F(BrokerStreamsOnServer, DuplicateIdStoredOnceRedeliveredAfterAckWaitTermEndsIt) {
  ConsumerSettings s;
  s.ack_wait_ms = 300;
  ASSERT_TRUE(ensure_consumer(*conn_, "work", s).ok());
  ASSERT_TRUE(conn_->publish(ticket_subject("work"), R"({"ticketID":"t1"})", "t1").ok());
  ASSERT_TRUE(conn_->publish(ticket_subject("work"), R"({"ticketID":"t1","again":1})", "t1").ok());
  ASSERT_TRUE(conn_->publish(ticket_subject("work"), R"({"ticketID":"t2"})", "t2").ok());
  auto stats = consumer_stats(*conn_, "work");
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->pending, 2u);

  auto consumer = PullConsumer::bind(*conn_, "work");
  ASSERT_TRUE(consumer.ok()) << consumer.status().message();
  auto d1 = (*consumer)->fetch_one(1000);
  ASSERT_TRUE(d1.ok() && *d1) << d1.status().message();
  EXPECT_EQ((*d1)->data(), R"({"ticketID":"t1"})");
  EXPECT_EQ((*d1)->delivery_count(), 1u);
  // InProgress holds it past the ack wait.
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    ASSERT_TRUE((*d1)->in_progress().ok());
  }
  auto d2 = (*consumer)->fetch_one(1000);
  ASSERT_TRUE(d2.ok() && *d2);
  EXPECT_EQ((*d2)->data(), R"({"ticketID":"t2"})");
  // t1 left unsettled comes back after the ack wait, counted.
  d1->reset();
  auto again = (*consumer)->fetch_one(2000);
  ASSERT_TRUE(again.ok() && *again);
  EXPECT_EQ((*again)->data(), R"({"ticketID":"t1"})");
  EXPECT_EQ((*again)->delivery_count(), 2u);
  ASSERT_TRUE((*again)->term().ok());
  ASSERT_TRUE((*d2)->ack().ok());
  auto none = (*consumer)->fetch_one(800);  // past the ack wait: nothing comes back
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(*none);
  auto empty = (*consumer)->fetch_one(0);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_FALSE(*empty);
}

TEST_F(BrokerStreamsOnServer, ResultsAreReadBackAndSurviveARestart) {
  auto missing = conn_->last_message(kResultStream, result_subject("r1"));
  ASSERT_TRUE(missing.ok()) << missing.status().message();
  EXPECT_FALSE(*missing);
  ASSERT_TRUE(conn_->publish(result_subject("r1"), R"({"type":"done"})", "r1").ok());
  ASSERT_TRUE(conn_->publish(result_subject("r1"), R"({"type":"done","twice":1})", "r1").ok());  // deduplicated
  ASSERT_TRUE(server_->restart());
  for (int i = 0; i < 200 && !conn_->connected(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_TRUE(conn_->connected());
  auto found = conn_->last_message(kResultStream, result_subject("r1"));
  ASSERT_TRUE(found.ok()) << found.status().message();
  ASSERT_TRUE(*found);
  EXPECT_EQ(**found, R"({"type":"done"})");
}

}  // namespace
}  // namespace revis::broker
