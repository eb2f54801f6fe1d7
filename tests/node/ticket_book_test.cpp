#include "node/ticket_book.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace revis::node {
namespace {

// A client link that keeps what it was sent.
struct BookClient : ClientLink {
  std::vector<nlohmann::json> events;
  void send(TicketEvent event) override { events.push_back(nlohmann::json::parse(event.text())); }
  void refuse(const std::optional<std::string>&, const NodeError&) override { ADD_FAILURE() << "nothing is refused here"; }
  std::vector<std::string> types() const {
    std::vector<std::string> out;
    for (const auto& e : events) out.push_back(e.value("type", ""));
    return out;
  }
};

std::unique_ptr<TicketEntry> book_entry(const std::string& id, bool kept = true) {
  auto e = std::make_unique<TicketEntry>();
  e->id = id;
  e->kept = kept;
  return e;
}

TicketBookLimits roomy_limits() { return {std::chrono::seconds(3600), 100, size_t(1) << 20, true}; }

void emit_tokens(TicketBook& book, TicketEntry& entry, int n) REQUIRES(book.mu) {
  for (int i = 0; i < n; ++i)
    book.emit(entry, token_event(entry.id, book.next_seq(entry), "t" + std::to_string(i), {}, false));
}

// A new ticket `id` that `client` follows, `tokens` token events into its run.
TicketEntry& followed_ticket(TicketBook& book, const std::string& id, const std::shared_ptr<BookClient>& client, int tokens)
    REQUIRES(book.mu) {
  TicketEntry& e = book.add(book_entry(id));
  EXPECT_TRUE(book.attach(e, client, 0, -1));
  emit_tokens(book, e, tokens);
  return e;
}

TEST(TicketBook, TwoClientsOfOneTicketGetEveryEventAndTheResultOnce) {
  TicketBook book(roomy_limits());
  auto a = std::make_shared<BookClient>(), b = std::make_shared<BookClient>();
  MutexLock lock(book.mu);
  TicketEntry& e = followed_ticket(book, "t1", a, 2);
  // The same ticketID from a second connection: it attaches, and catches up.
  EXPECT_EQ(book.find("t1"), &e);
  EXPECT_TRUE(book.attach(e, b, 0, -1));
  EXPECT_TRUE(book.attach(e, b, 1, 1)) << "caught up: nothing to replay, and still one client";
  emit_tokens(book, e, 1);
  book.finish(e, error_event("t1", {ErrorCode::kCancelled, "stop"}));
  for (auto* c : {a.get(), b.get()}) {
    ASSERT_EQ(c->types(), (std::vector<std::string>{"token", "token", "token", "error"}));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(c->events[i].value("seq", -1), i);
  }
  EXPECT_FALSE(book.follows(e, a)) << "a finished ticket has no clients";
  EXPECT_EQ(book.kept_results(), 1u);
}

TEST(TicketBook, ResumeReplaysTheTokensAfterTheSeqItNames) {
  TicketBook book(roomy_limits());
  auto first = std::make_shared<BookClient>(), back = std::make_shared<BookClient>();
  MutexLock lock(book.mu);
  TicketEntry& e = followed_ticket(book, "t2", first, 5);
  book.detach(e, first);
  book.attach(e, back, 1, 2);  // it saw seq 0..2
  ASSERT_EQ(back->types(), (std::vector<std::string>{"token", "token"}));
  EXPECT_EQ(back->events[0].value("seq", -1), 3);
  EXPECT_EQ(first->events.size(), 5u);
  emit_tokens(book, e, 1);
  EXPECT_EQ(first->events.size(), 5u) << "a detached client hears nothing more";
  EXPECT_EQ(back->events.back().value("seq", -1), 5);
}

TEST(TicketBook, AResumeOfAnEarlierAttemptGetsARetryAndTheWholeText) {
  TicketBook book(roomy_limits());
  auto a = std::make_shared<BookClient>(), late = std::make_shared<BookClient>();
  MutexLock lock(book.mu);
  TicketEntry& e = followed_ticket(book, "t3", a, 3);
  book.restart(e, "the node was lost");
  EXPECT_EQ(e.attempt, 2);
  emit_tokens(book, e, 2);
  ASSERT_EQ(a->types(), (std::vector<std::string>{"token", "token", "token", "retry", "token", "token"}));
  EXPECT_EQ(a->events[4].value("seq", -1), 0) << "seq restarts with the attempt";
  book.attach(e, late, 1, 2);
  ASSERT_EQ(late->types(), (std::vector<std::string>{"retry", "token", "token"}));
  EXPECT_EQ(late->events[0].value("attempt", 0), 2);
}

TEST(TicketBook, EventsItCannotNumberReachTheClientsButAreNotReplayed) {
  TicketBook book(roomy_limits());
  auto a = std::make_shared<BookClient>(), late = std::make_shared<BookClient>();
  MutexLock lock(book.mu);
  TicketEntry& e = followed_ticket(book, "t6", a, 0);
  // Followed from the middle of a run: seq 7 is not the book's seq 0.
  book.pass(e, token_event("t6", 7, "x", {}, false));
  EXPECT_EQ(a->events.size(), 1u);
  EXPECT_EQ(book.next_seq(e), 0u);
  // The transport names the attempt of a run that starts again.
  book.restart(e, "redelivered", 3);
  EXPECT_EQ(e.attempt, 3);
  EXPECT_EQ(a->events.back().value("attempt", 0), 3);
  emit_tokens(book, e, 1);
  book.attach(e, late, 3, -1);
  EXPECT_EQ(late->types(), (std::vector<std::string>{"token"}));
}

TEST(TicketBook, AFinishedTicketAnswersALateClientWithItsResult) {
  TicketBookLimits limits = roomy_limits();
  limits.keep_finished_tokens = false;  // the result is stored elsewhere too
  TicketBook book(limits);
  auto late = std::make_shared<BookClient>();
  MutexLock lock(book.mu);
  TicketEntry& e = book.add(book_entry("t4"));
  emit_tokens(book, e, 3);
  bool recorded_first = false;
  book.finish(e, error_event("t4", {ErrorCode::kInternal, "x"}), [&](const TicketEntry& entry) {
    recorded_first = entry.finished() && late->events.empty();
  });
  EXPECT_TRUE(recorded_first);
  EXPECT_FALSE(book.attach(e, late, 0, -1)) << "nothing left to follow";
  EXPECT_EQ(late->types(), (std::vector<std::string>{"error"})) << "only the final event: the tokens were dropped";
}

TEST(TicketBook, AnOpenAIRequestIsForgottenWhenItFinishes) {
  TicketBook book(roomy_limits());
  auto a = std::make_shared<BookClient>();
  MutexLock lock(book.mu);
  TicketEntry& e = book.add(book_entry("t5", false));
  book.attach(e, a, 0, -1);
  book.finish(e, error_event("t5", {ErrorCode::kInternal, "x"}));
  EXPECT_EQ(a->types(), (std::vector<std::string>{"error"}));
  EXPECT_EQ(book.find("t5"), nullptr);
  EXPECT_EQ(book.kept_results(), 0u);
}

TEST(TicketBook, ADisconnectLeavesTheTicketsItWasTheLastClientOf) {
  TicketBook book(roomy_limits());
  auto a = std::make_shared<BookClient>(), b = std::make_shared<BookClient>();
  MutexLock lock(book.mu);
  TicketEntry& shared = book.add(book_entry("shared"));
  TicketEntry& alone = book.add(book_entry("alone"));
  book.add(book_entry("nobody"));
  book.attach(shared, a, 0, -1);
  book.attach(shared, b, 0, -1);
  book.attach(alone, a, 0, -1);
  auto orphans = book.detach_everywhere(a);
  ASSERT_EQ(orphans.size(), 1u);
  EXPECT_EQ(orphans[0], &alone) << "a ticket that never had a client is not orphaned by this link";
  EXPECT_TRUE(book.follows(shared, b));
}

TEST(TicketBook, KeptResultsExpireAndStayWithinTheCaps) {
  TicketBookLimits limits = roomy_limits();
  limits.max_results = 2;
  TicketBook book(limits);
  MutexLock lock(book.mu);
  for (const char* id : {"r1", "r2", "r3"}) book.finish(book.add(book_entry(id)), error_event(id, {ErrorCode::kInternal, "x"}));
  EXPECT_EQ(book.find("r1"), nullptr) << "the oldest goes past max_results";
  EXPECT_NE(book.find("r3"), nullptr);
  EXPECT_EQ(book.kept_results(), 2u);
  const size_t bytes = book.kept_result_bytes();
  book.erase("r2");
  EXPECT_LT(book.kept_result_bytes(), bytes);
  EXPECT_EQ(book.kept_results(), 1u);

  TicketBook brief({std::chrono::seconds(0), 100, size_t(1) << 20, true});
  MutexLock brief_lock(brief.mu);
  // Read back from a journal, finished an hour ago: past result_ttl.
  brief.add_finished(book_entry("old"), error_event("old", {ErrorCode::kInternal, "x"}).text(), Clock::now() - std::chrono::hours(1));
  brief.add_finished(book_entry("new"), error_event("new", {ErrorCode::kInternal, "x"}).text(), Clock::now() + std::chrono::hours(1));
  brief.sweep();
  EXPECT_EQ(brief.find("old"), nullptr);
  EXPECT_NE(brief.find("new"), nullptr);
}

TEST(TicketBook, ASuspendedTicketForgetsItsClientsAndTokensSilently) {
  TicketBook book(roomy_limits());
  auto a = std::make_shared<BookClient>();
  MutexLock lock(book.mu);
  TicketEntry& e = followed_ticket(book, "s1", a, 2);
  book.suspend(e);
  EXPECT_EQ(a->events.size(), 2u);
  EXPECT_TRUE(e.clients.empty());
  EXPECT_EQ(book.next_seq(e), 0u);
  EXPECT_FALSE(e.finished());
}

}  // namespace
}  // namespace revis::node
