#include "fabric/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <sqlite3.h>

namespace revis::fabric {
namespace {

// The schema; `seq` keeps acceptance order for the replay on start-up.
constexpr const char* kSchema =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS tickets ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  id TEXT NOT NULL UNIQUE,"
    "  ticket TEXT NOT NULL,"
    "  attempt INTEGER NOT NULL DEFAULT 1,"
    "  result TEXT,"
    "  finished_ms INTEGER,"
    "  handed_to TEXT);";
// A journal from before handed_to gets the column.
constexpr const char* kAddHandedTo = "ALTER TABLE tickets ADD COLUMN handed_to TEXT;";

}  // namespace

Result<std::unique_ptr<Journal>> Journal::open(const std::string& path) {
  // The journal holds the tickets' text: readable by the node's user only.
  // Created 0600 before SQLite opens it (its -wal and -shm files take the
  // database file's mode), and an older one made so too.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::error(path + ": cannot open the journal: " + std::strerror(errno));
  const bool private_mode = ::fchmod(fd, 0600) == 0;
  ::close(fd);
  if (!private_mode) return Status::error(path + ": cannot make the journal private (chmod 0600): " + std::strerror(errno));
  for (const char* side : {"-wal", "-shm"}) ::chmod((path + side).c_str(), 0600);  // absent: nothing to do
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status::error(path + ": cannot open the journal: " + why);
  }
  sqlite3_busy_timeout(db, 2000);
  char* err = nullptr;
  if (sqlite3_exec(db, kSchema, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    sqlite3_close(db);
    return Status::error(path + ": not a usable journal (SQLite: " + why + ")");
  }
  sqlite3_stmt* probe = nullptr;
  const bool has_handed_to = sqlite3_prepare_v2(db, "SELECT handed_to FROM tickets LIMIT 0", -1, &probe, nullptr) == SQLITE_OK;
  sqlite3_finalize(probe);
  if (!has_handed_to && sqlite3_exec(db, kAddHandedTo, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    sqlite3_close(db);
    return Status::error(path + ": cannot add the handed_to column to the journal (SQLite: " + why + ")");
  }
  return std::unique_ptr<Journal>(new Journal(db, path));
}

Journal::~Journal() { sqlite3_close(db_); }

// Binds the text arguments first (?1, ?2, ...), then the integers.
Status Journal::exec(const std::string& sql, const std::vector<std::string>& text_args,
                     const std::vector<int64_t>& int_args) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK)
    return Status::error(path_ + ": journal: " + sqlite3_errmsg(db_));
  int i = 1;
  for (const std::string& t : text_args) sqlite3_bind_text(stmt, i++, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
  for (int64_t v : int_args) sqlite3_bind_int64(stmt, i++, v);
  const int rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return Status::error(path_ + ": journal write failed: " + sqlite3_errmsg(db_));
  return {};
}

Status Journal::accepted(const std::string& id, const std::string& ticket_json) {
  return exec("INSERT OR REPLACE INTO tickets (id, ticket, attempt, result, finished_ms, handed_to) VALUES (?1, ?2, 1, NULL, NULL, NULL)",
              {id, ticket_json}, {});
}

Status Journal::attempt(const std::string& id, int attempt) {
  return exec("UPDATE tickets SET attempt = ?2 WHERE id = ?1", {id}, {attempt});
}

Status Journal::finished(const std::string& id, const std::string& terminal_event, int64_t unix_ms) {
  return exec("UPDATE tickets SET result = ?2, finished_ms = ?3 WHERE id = ?1", {id, terminal_event}, {unix_ms});
}

Status Journal::handed(const std::string& id, const std::string& peer) {
  return exec("UPDATE tickets SET handed_to = ?2 WHERE id = ?1", {id, peer}, {});
}

Result<std::string> Journal::result(const std::string& id, int64_t keep_since_unix_ms) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT result FROM tickets WHERE id = ?1 AND result IS NOT NULL AND finished_ms >= ?2", -1,
                         &stmt, nullptr) != SQLITE_OK)
    return Status::error(path_ + ": journal: " + sqlite3_errmsg(db_));
  sqlite3_bind_text(stmt, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(stmt, 2, keep_since_unix_ms);
  std::string out;
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(stmt, 0);
    if (t) out.assign(reinterpret_cast<const char*>(t), sqlite3_column_bytes(stmt, 0));
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Status::error(path_ + ": reading the journal failed: " + sqlite3_errmsg(db_));
  return out;
}

Status Journal::forget(const std::string& id) { return exec("DELETE FROM tickets WHERE id = ?1", {id}, {}); }

Result<std::vector<JournalEntry>> Journal::load(int64_t keep_since_unix_ms) {
  if (Status s = exec("DELETE FROM tickets WHERE result IS NOT NULL AND finished_ms < ?1", {}, {keep_since_unix_ms}); !s.ok())
    return s;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT id, ticket, attempt, result, finished_ms, handed_to FROM tickets ORDER BY seq", -1, &stmt,
                         nullptr) != SQLITE_OK)
    return Status::error(path_ + ": journal: " + sqlite3_errmsg(db_));
  std::vector<JournalEntry> entries;
  int rc;
  auto text = [&](int col) {
    const unsigned char* t = sqlite3_column_text(stmt, col);
    return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(stmt, col)) : std::string();
  };
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    JournalEntry e;
    e.id = text(0);
    e.ticket = text(1);
    e.attempt = sqlite3_column_int(stmt, 2);
    e.result = text(3);
    e.finished_unix_ms = sqlite3_column_int64(stmt, 4);
    e.handed_to = text(5);
    entries.push_back(std::move(e));
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return Status::error(path_ + ": reading the journal failed: " + sqlite3_errmsg(db_));
  return entries;
}

}  // namespace revis::fabric
