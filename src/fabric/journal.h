// The accepting node's journal: every ticket it accepted, and the result of
// each one that finished, in a small SQLite file. On start-up the node reads
// it back: unfinished tickets run again, finished results are served again
// to clients that resume or resend (until they expire), so a restart loses
// nothing and runs nothing twice from a client's point of view.
//
// The file (and SQLite's -wal and -shm beside it) is mode 0600: it holds
// the tickets' text.
//
// Writes use SQLite's WAL mode with synchronous=NORMAL: a committed write
// survives the process being killed (kill -9); only a power cut may lose
// the last few.
//
// Thread-safety: none; the ticket journal (fabric/ticket_journal.h) calls it
// under its own lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "revis/status.h"

struct sqlite3;

namespace revis::fabric {

struct JournalEntry {
  std::string id;
  std::string ticket;          // the ticket message as JSON
  int attempt = 1;
  std::string result;          // the terminal event as JSON; empty while unfinished
  int64_t finished_unix_ms = 0;
  std::string handed_to;       // unfinished, handed to this peer (HOST:PORT) at a shutdown; empty: not
};

class Journal {
 public:
  static Result<std::unique_ptr<Journal>> open(const std::string& path);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  Status accepted(const std::string& id, const std::string& ticket_json);
  Status attempt(const std::string& id, int attempt);
  Status finished(const std::string& id, const std::string& terminal_event, int64_t unix_ms);
  // The ticket went to peer HOST:PORT at this node's shutdown: the next
  // start asks that peer for it instead of running it again.
  Status handed(const std::string& id, const std::string& peer);
  // The stored terminal event of a ticket that finished at or after
  // `keep_since_unix_ms`; empty when there is none.
  Result<std::string> result(const std::string& id, int64_t keep_since_unix_ms);
  // Removes a ticket: it ended without a result worth keeping.
  Status forget(const std::string& id);
  // Deletes results finished before `keep_since_unix_ms`, then returns the
  // rest, oldest accepted first.
  Result<std::vector<JournalEntry>> load(int64_t keep_since_unix_ms);

 private:
  Journal(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status exec(const std::string& sql, const std::vector<std::string>& text_args, const std::vector<int64_t>& int_args);

  sqlite3* db_;
  std::string path_;
};

}  // namespace revis::fabric
