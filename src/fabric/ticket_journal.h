// The dispatcher's ticket journal: a ticket's life as the SQLite journal
// (fabric/journal.h) records it, so that a restart of the node loses
// nothing and runs nothing twice. It writes each ticket as it is accepted,
// retried, handed off and finished; reads back a result no longer in RAM;
// and at the node's ends decides what the journal keeps: at a shutdown, the
// tickets that stay unfinished here (suspend) or go to a peer (hand-off),
// at start-up, what is read back into the book (restore).
//
// Writes are kept off the book's lock. The desk decides under it and queues
// the write there, which costs a string into a queue: the writes keep the
// order of its decisions (one ticket's `accepted` before its `attempt`s
// before its result). flush() writes them once the lock is released. An
// event a client must not hear before its write is on disk (a ticket's
// `accepted`, its result: a client never holds what a restarted node would
// not know) waits in the desk until flush() has written through that
// write's number (Dispatcher::settle). Reads write the queue first, so that
// they see every decision made.
//
// Thread-safety: any thread. queue_mu_ guards the queue and may be taken
// under the book's lock; db_mu_ guards the SQLite connection, and the desk
// never holds the book's lock while calling what takes it (flush, hand-off
// notes, the reads): SQLite runs outside the book's lock. Order: db_mu_,
// then queue_mu_. The decisions on records take the book (REQUIRES(book.mu)).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "fabric/journal.h"
#include "fabric/peer_set.h"
#include "fabric/ticket_record.h"
#include "node/executor.h"
#include "node/ticket_book.h"
#include "revis/status.h"

namespace revis::fabric {

class TicketJournal {
 public:
  static Result<std::unique_ptr<TicketJournal>> open(const std::string& path);

  // ---- writes
  // A queued write's number; numbers grow in queue order.
  using Write = uint64_t;
  Write accepted(const std::string& id, std::string ticket_json) EXCLUDES(queue_mu_);
  Write attempt(const std::string& id, int attempt) EXCLUDES(queue_mu_);
  Write finished(const std::string& id, std::string terminal_event) EXCLUDES(queue_mu_);
  // The peer it was handed to ("": none any more).
  Write handed(const std::string& id, std::string peer) EXCLUDES(queue_mu_);
  Write forget(const std::string& id) EXCLUDES(queue_mu_);
  bool queued() const EXCLUDES(queue_mu_);
  // Writes the queue, in order, and returns the number written through. A
  // failed write is logged and passed over: the node runs on without it, as
  // it would without a journal.
  Write flush() EXCLUDES(db_mu_, queue_mu_);

  // ---- reads
  // The stored final event of a ticket that finished within `ttl_s`; empty
  // when there is none.
  Result<std::string> result(const std::string& id, int ttl_s) EXCLUDES(db_mu_, queue_mu_);

  // ---- a shutdown
  // During a shutdown: a kept ticket that no client cancelled stays
  // unfinished, here and in the book (kSuspended: out of `waiting`, no
  // final event, its clients dropped) instead of ending as cancelled; the
  // next start runs it. False when that does not apply.
  bool suspend(node::TicketBook& book, std::deque<std::string>& waiting, TicketRecord& rec) REQUIRES(book.mu);
  // A ticket a shutdown hands to a peer (Dispatcher, Hand-off).
  struct HandOff {
    std::string id;
    PeerView peer;
    Status noted;  // the note's write
  };
  // Chooses them: kept tickets not started here, from `waiting` or queued
  // in `executor`, each to the live peer (of `peers`, with this node's
  // catalogue) that serves its tier with the fewest tickets in flight, so that they spread.
  // Each is kHandedOff from now on, which nothing moves while the node
  // shuts down.
  std::vector<HandOff> choose_hand_offs(node::TicketBook& book, std::deque<std::string>& waiting, node::Executor& executor,
                                        std::vector<PeerView> peers, const node::Catalog& catalog) REQUIRES(book.mu);
  // Notes each one's peer now, with the book's lock released and before it
  // leaves: should this node stop before the peer has it, the next start
  // sends it there again, and the peer runs it once either way.
  void note(std::vector<HandOff>& hand_offs) EXCLUDES(db_mu_, queue_mu_);

  // ---- start-up
  // A ticket read back, as a record.
  struct ReadBack {
    std::unique_ptr<TicketRecord> record;
    std::string result;  // its final event; empty while unfinished
    int64_t finished_unix_ms = 0;
    std::string handed_to;  // unfinished, handed to this peer at a shutdown; empty: not
  };
  // Every ticket, oldest accepted first, results older than `ttl_s`
  // deleted. One that cannot be read back is dropped (and logged).
  Result<std::vector<ReadBack>> load(int ttl_s) EXCLUDES(db_mu_, queue_mu_);
  struct Restored {
    std::vector<TicketRecord*> to_run;  // oldest first
    int kept = 0, handed = 0;
  };
  // Puts what load() read into the book: results as kept results, tickets
  // handed to a peer that `is_peer` still as kHandedOff (relayed once its
  // link is up); the rest are for the desk to run again. A ticket the book
  // holds already (sent again meanwhile) stands.
  Restored restore(node::TicketBook& book, std::vector<ReadBack> read, const std::function<bool(const std::string&)>& is_peer)
      REQUIRES(book.mu);

  const std::string& path() const { return path_; }

 private:
  using Operation = std::function<Status(Journal&)>;
  TicketJournal(std::unique_ptr<Journal> db, std::string path) : db_(std::move(db)), path_(std::move(path)) {}
  Write queue(Operation op) EXCLUDES(queue_mu_);
  Write write_queued() REQUIRES(db_mu_) EXCLUDES(queue_mu_);

  Mutex db_mu_;
  const std::unique_ptr<Journal> db_ PT_GUARDED_BY(db_mu_);
  Write written_ GUARDED_BY(db_mu_) = 0;

  mutable Mutex queue_mu_;
  std::deque<std::pair<Write, Operation>> queue_ GUARDED_BY(queue_mu_);
  Write last_queued_ GUARDED_BY(queue_mu_) = 0;

  const std::string path_;
};

}  // namespace revis::fabric
