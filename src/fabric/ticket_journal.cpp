#include "fabric/ticket_journal.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <variant>

#include "base/log.h"

namespace revis::fabric {

Result<std::unique_ptr<TicketJournal>> TicketJournal::open(const std::string& path) {
  auto db = Journal::open(path);
  if (!db.ok()) return db.status();
  return std::unique_ptr<TicketJournal>(new TicketJournal(std::move(*db), path));
}

TicketJournal::Write TicketJournal::queue(Operation op) {
  MutexLock lock(queue_mu_);
  queue_.emplace_back(++last_queued_, std::move(op));
  return last_queued_;
}

TicketJournal::Write TicketJournal::accepted(const std::string& id, std::string ticket_json) {
  return queue([id, ticket_json = std::move(ticket_json)](Journal& db) { return db.accepted(id, ticket_json); });
}

TicketJournal::Write TicketJournal::attempt(const std::string& id, int attempt) {
  return queue([id, attempt](Journal& db) { return db.attempt(id, attempt); });
}

TicketJournal::Write TicketJournal::finished(const std::string& id, std::string terminal_event) {
  return queue([id, terminal_event = std::move(terminal_event), at = unix_ms_now()](Journal& db) {
    return db.finished(id, terminal_event, at);
  });
}

TicketJournal::Write TicketJournal::handed(const std::string& id, std::string peer) {
  return queue([id, peer = std::move(peer)](Journal& db) { return db.handed(id, peer); });
}

TicketJournal::Write TicketJournal::forget(const std::string& id) {
  return queue([id](Journal& db) { return db.forget(id); });
}

bool TicketJournal::queued() const {
  MutexLock lock(queue_mu_);
  return !queue_.empty();
}

TicketJournal::Write TicketJournal::write_queued() {
  while (true) {
    std::deque<std::pair<Write, Operation>> batch;
    {
      MutexLock lock(queue_mu_);
      if (queue_.empty()) return written_;
      batch.swap(queue_);
    }
    for (auto& [number, op] : batch) {
      if (Status s = op(*db_); !s.ok()) revis::log_line("warn", s.message());
      written_ = number;
    }
  }
}

TicketJournal::Write TicketJournal::flush() {
  MutexLock lock(db_mu_);
  return write_queued();
}

Result<std::string> TicketJournal::result(const std::string& id, int ttl_s) {
  MutexLock lock(db_mu_);
  write_queued();
  return db_->result(id, unix_ms_now() - int64_t(ttl_s) * 1000);
}

// ---------------------------------------------------------------- a shutdown

bool TicketJournal::suspend(node::TicketBook& book, std::deque<std::string>& waiting, TicketRecord& rec) {
  if (!rec.kept || rec.cancel_requested || rec.orphaned) return false;
  std::erase(waiting, rec.ticket.id);
  rec.where = TicketRecord::Where::kSuspended;
  ++rec.placement;  // a late callback of the run it had is ignored
  // No terminal event: the client's connection closes with the node, and a
  // resend or resume after the restart reaches the ticket again.
  book.suspend(rec);
  return true;
}

std::vector<TicketJournal::HandOff> TicketJournal::choose_hand_offs(node::TicketBook& book, std::deque<std::string>& waiting,
                                                                    node::Executor& executor, std::vector<PeerView> peers,
                                                                    const node::Catalog& catalog) {
  std::vector<HandOff> chosen;
  std::map<std::string, int> given;  // by peer: the tickets are spread over the live ones
  auto pick = [&](const std::string& tier) -> PeerView* {
    PeerView* best = nullptr;
    for (PeerView& p : peers) {
      if (!p.takes_tickets(catalog.digest()) || !p.state.serves(tier)) continue;
      if (!best || p.in_flight + given[p.key] < best->in_flight + given[best->key]) best = &p;
    }
    return best;
  };
  auto movable = [](const TicketRecord& rec) { return rec.kept && rec.travels && !rec.cancel_requested && !rec.orphaned; };
  auto hand = [&](TicketRecord& rec, PeerView& peer) REQUIRES(book.mu) {
    rec.where = TicketRecord::Where::kHandedOff;
    rec.handed_to = peer.key;
    ++rec.placement;
    ++given[peer.key];
    ++peer.in_flight;  // as the desk's forward() will count it there
    chosen.push_back({rec.ticket.id, peer, {}});
  };
  for (auto it = waiting.begin(); it != waiting.end();) {
    TicketRecord& rec = *find_record(book, *it);
    const std::string* tier = tier_of(catalog, rec.ticket);
    PeerView* peer = tier && movable(rec) ? pick(*tier) : nullptr;
    if (!peer) {
      ++it;
      continue;
    }
    it = waiting.erase(it);
    hand(rec, *peer);
  }
  while (auto job = executor.take_queued([&](const node::JobSpec& spec) REQUIRES(book.mu) {  // called under this lock
           const TicketRecord* rec = find_record(book, spec.label);
           return rec && rec->where == TicketRecord::Where::kLocal && movable(*rec) && pick(spec.tier) != nullptr;
         }))
    hand(*find_record(book, job->spec.label), *pick(job->spec.tier));
  return chosen;
}

void TicketJournal::note(std::vector<HandOff>& hand_offs) {
  MutexLock lock(db_mu_);
  write_queued();
  for (HandOff& h : hand_offs) h.noted = db_->handed(h.id, h.peer.key);
}

// ---------------------------------------------------------------- start-up

Result<std::vector<TicketJournal::ReadBack>> TicketJournal::load(int ttl_s) {
  MutexLock lock(db_mu_);
  write_queued();
  auto entries = db_->load(unix_ms_now() - int64_t(ttl_s) * 1000);
  if (!entries.ok()) return entries.status();
  std::vector<ReadBack> read;
  for (JournalEntry& e : *entries) {
    auto parsed = node::parse_client_message(e.ticket, size_t(1) << 30);
    auto* message = std::get_if<node::ClientMessage>(&parsed);
    auto* ticket = message ? std::get_if<node::Ticket>(message) : nullptr;
    if (!ticket) {
      revis::log_line("warn", path_ + ": ticket " + e.id + " cannot be read back; dropped");
      (void)db_->forget(e.id);
      continue;
    }
    auto rec = std::make_unique<TicketRecord>(std::move(*ticket));
    rec->id = e.id;
    rec->received = node::Clock::now();
    rec->attempt = e.attempt;
    read.push_back({std::move(rec), std::move(e.result), e.finished_unix_ms, std::move(e.handed_to)});
  }
  return read;
}

TicketJournal::Restored TicketJournal::restore(node::TicketBook& book, std::vector<ReadBack> read,
                                               const std::function<bool(const std::string&)>& is_peer) {
  Restored restored;
  const int64_t now_ms = unix_ms_now();
  for (ReadBack& r : read) {
    std::unique_ptr<TicketRecord>& rec = r.record;
    if (book.find(rec->id)) continue;
    if (!r.result.empty()) {
      rec->where = TicketRecord::Where::kDone;
      const auto finished = node::Clock::now() - std::chrono::milliseconds(std::max<int64_t>(0, now_ms - r.finished_unix_ms));
      book.add_finished(std::move(rec), r.result, finished);
      ++restored.kept;
      continue;
    } else if (!r.handed_to.empty() && is_peer(r.handed_to)) {
      rec->where = TicketRecord::Where::kHandedOff;  // relayed once that peer's link is up
      rec->handed_to = r.handed_to;
      ++restored.handed;
    } else {
      if (!r.handed_to.empty())
        revis::log_line("warn", path_ + ": ticket " + rec->id + " was handed to " + r.handed_to +
                                   ", no longer a peer of this node; it runs here");
      restored.to_run.push_back(rec.get());
    }
    book.add(std::move(rec));
  }
  book.sweep();  // beyond the caps, the oldest stay in the journal only
  return restored;
}

}  // namespace revis::fabric
