#include "fabric/journal.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <sqlite3.h>

#include "support/testdata.h"

namespace revis::fabric {
namespace {

using testing::TempDir;

// The journal holds ticket text: only its owner may read it, whatever the
// umask, and an older journal made readable by others is made private.
TEST(Journal, IsPrivateToItsOwner) {
  TempDir dir;
  const std::string path = dir.file("node.journal");
  auto mode = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? int(st.st_mode & 0777) : -1;
  };
  {
    auto j = Journal::open(path);
    ASSERT_TRUE(j.ok()) << j.status().message();
    ASSERT_TRUE((*j)->accepted("t1", R"({"type":"ticket","ticketID":"t1","taskType":"chat","args":{"text":"secret"}})").ok());
    EXPECT_EQ(mode(path), 0600);
    if (std::filesystem::exists(path + "-wal")) {
      EXPECT_EQ(mode(path + "-wal"), 0600);
    }
  }
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto again = Journal::open(path);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(mode(path), 0600);
}

TEST(Journal, RecordsAcceptedAttemptsAndResultsAcrossReopen) {
  TempDir dir;
  const std::string path = dir.file("node.journal");
  {
    auto j = Journal::open(path);
    ASSERT_TRUE(j.ok()) << j.status().message();
    ASSERT_TRUE((*j)->accepted("t1", R"({"type":"ticket","ticketID":"t1","taskType":"chat"})").ok());
    ASSERT_TRUE((*j)->accepted("t2", R"({"type":"ticket","ticketID":"t2","taskType":"chat"})").ok());
    ASSERT_TRUE((*j)->accepted("t3", R"({"type":"ticket","ticketID":"t3","taskType":"chat"})").ok());
    ASSERT_TRUE((*j)->attempt("t2", 2).ok());
    ASSERT_TRUE((*j)->finished("t1", R"({"type":"done","ticketID":"t1"})", 5000).ok());
    ASSERT_TRUE((*j)->forget("t3").ok());
  }  // closed as a killed process would leave it: every write was committed
  auto j = Journal::open(path);
  ASSERT_TRUE(j.ok()) << j.status().message();
  auto entries = (*j)->load(0);
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].id, "t1");
  EXPECT_EQ((*entries)[0].result, R"({"type":"done","ticketID":"t1"})");
  EXPECT_EQ((*entries)[0].finished_unix_ms, 5000);
  EXPECT_EQ((*entries)[1].id, "t2");
  EXPECT_EQ((*entries)[1].attempt, 2);
  EXPECT_TRUE((*entries)[1].result.empty()) << "unfinished";
  EXPECT_NE((*entries)[1].ticket.find("\"ticketID\":\"t2\""), std::string::npos);
}

TEST(Journal, ExpiredResultsAreDeletedUnfinishedTicketsKept) {
  TempDir dir;
  auto j = Journal::open(dir.file("j.sqlite"));
  ASSERT_TRUE(j.ok());
  ASSERT_TRUE((*j)->accepted("old", "{}").ok());
  ASSERT_TRUE((*j)->finished("old", "{\"type\":\"done\"}", 1000).ok());
  ASSERT_TRUE((*j)->accepted("new", "{}").ok());
  ASSERT_TRUE((*j)->finished("new", "{\"type\":\"done\"}", 9000).ok());
  ASSERT_TRUE((*j)->accepted("open", "{}").ok());
  auto entries = (*j)->load(5000);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].id, "new");
  EXPECT_EQ((*entries)[1].id, "open");
  EXPECT_EQ((*j)->load(5000)->size(), 2u) << "deleting is idempotent";
}

TEST(Journal, SameTicketAcceptedAgainStartsOver) {
  TempDir dir;
  auto j = Journal::open(dir.file("j.sqlite"));
  ASSERT_TRUE(j.ok());
  ASSERT_TRUE((*j)->accepted("t", "{\"v\":1}").ok());
  ASSERT_TRUE((*j)->finished("t", "{}", 10).ok());
  ASSERT_TRUE((*j)->accepted("t", "{\"v\":2}").ok());
  auto entries = (*j)->load(0);
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].ticket, "{\"v\":2}");
  EXPECT_TRUE((*entries)[0].result.empty());
}

// A ticket handed to a peer at a shutdown keeps that peer across a reopen,
// and a journal from before the handed_to column gains it, rows intact.
TEST(Journal, RemembersWhichPeerATicketWasHandedTo) {
  TempDir dir;
  const std::string path = dir.file("node.journal");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE tickets (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,"
                           " ticket TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 1, result TEXT, finished_ms INTEGER);"
                           "INSERT INTO tickets (id, ticket) VALUES ('old', '{}');",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  {
    auto j = Journal::open(path);
    ASSERT_TRUE(j.ok()) << j.status().message();
    ASSERT_TRUE((*j)->accepted("t1", "{}").ok());
    ASSERT_TRUE((*j)->handed("old", "10.0.0.2:8080").ok());
  }
  auto j = Journal::open(path);
  ASSERT_TRUE(j.ok()) << j.status().message();
  auto entries = (*j)->load(0);
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].id, "old");
  EXPECT_EQ((*entries)[0].handed_to, "10.0.0.2:8080");
  EXPECT_TRUE((*entries)[1].handed_to.empty());
  // Accepted again (a new ticket with that ID): handed nowhere.
  ASSERT_TRUE((*j)->accepted("old", "{}").ok());
  EXPECT_TRUE((*j)->load(0)->at(1).handed_to.empty());
}

TEST(Journal, ErrorsNameTheFile) {
  TempDir dir;
  const std::string garbage = dir.file("not-a-db");
  std::ofstream(garbage) << std::string(4096, 'x');
  auto bad = Journal::open(garbage);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(garbage), std::string::npos) << bad.status().message();
  auto missing_dir = Journal::open(dir.file("no/such/dir/j.sqlite"));
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_NE(missing_dir.status().message().find("no/such/dir"), std::string::npos) << missing_dir.status().message();
}

}  // namespace
}  // namespace revis::fabric
