#include "fabric/dispatcher.h"

#include <algorithm>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/log.h"

namespace revis::fabric {
namespace {

namespace net = boost::asio;
using nlohmann::json;
using node::Clock;
using node::ErrorCode;
using node::NodeError;
using Where = TicketRecord::Where;

// Errors of a forwarded run after which the ticket may well succeed on
// another node; the rest (bad_request, unknown_task, ...) are the ticket's.
bool worth_another_node(ErrorCode code) {
  return code == ErrorCode::kModelUnavailable || code == ErrorCode::kInternal || code == ErrorCode::kCancelled ||
         code == ErrorCode::kCatalogMismatch;
}

// How long a stopping node waits for its peers to take the tickets it
// handed them; past that, its next start sends them again.
constexpr auto kHandOffWait = std::chrono::seconds(2);

}  // namespace

// The book's lock for one entry point. Released, it has the journal write
// what the entry point queued and the events that waited for that sent
// (settle(); see the header), so that none stays behind.
class SCOPED_CAPABILITY Dispatcher::DeskLock {
 public:
  explicit DeskLock(Dispatcher& desk) ACQUIRE(desk.book_.mu) : desk_(desk) { desk_.book_.mu.lock(); }
  // As with MutexLock, clang does not check this body: the reads of the
  // book's state come before the unlock.
  ~DeskLock() RELEASE() {
    const bool unsettled = !desk_.unannounced_.empty() || (desk_.journal_ && desk_.journal_->queued());
    desk_.book_.mu.unlock();
    if (unsettled) desk_.settle();
  }
  DeskLock(const DeskLock&) = delete;
  DeskLock& operator=(const DeskLock&) = delete;

 private:
  Dispatcher& desk_;
};

// The journal holds each result: a resume of a finished ticket gets its
// final event, not its token events.
Dispatcher::Dispatcher(node::Node& node, std::unique_ptr<TicketJournal> journal)
    : node_(node),
      config_(node.config()),
      io_(std::make_unique<net::io_context>()),
      book_({std::chrono::seconds(config_.result_ttl_s), size_t(config_.max_kept_results),
             size_t(config_.max_kept_results_mb) << 20, journal == nullptr}),
      peers_(node, *io_,
             {[this](const std::string& key, uint64_t link, uint64_t s) { on_peer_up(key, link, s); },
              [this](const std::string& key, uint64_t link, uint64_t s, const std::string& text) {
                on_peer_message(key, link, s, text);
              },
              [this](const std::string& key, uint64_t link, uint64_t s, const std::string& why) {
                on_peer_down(key, link, s, why);
              }}),
      placer_(node, peers_,
              {[this](const Record& rec) REQUIRES(book_.mu) { publish(rec); },
               [this](const std::string& id, uint64_t placement, std::string_view piece,
                      std::span<const node::LogprobEntry> logprobs, bool reasoning) {
                 on_local_text(id, placement, piece, logprobs, reasoning);
               },
               [this](const std::string& id, uint64_t placement, node::Outcome<node::JobResult> outcome) {
                 on_local_finish(id, placement, std::move(outcome));
               }}),
      journal_(std::move(journal)),
      feed_(node, peers_) {}

Result<std::unique_ptr<Dispatcher>> Dispatcher::create(node::Node& node) {
  std::unique_ptr<TicketJournal> journal;
  if (!node.config().journal.empty()) {
    auto opened = TicketJournal::open(node.config().journal);
    if (!opened.ok()) return opened.status();
    journal = std::move(*opened);
  }
  std::unique_ptr<Dispatcher> d(new Dispatcher(node, std::move(journal)));
  if (Status s = d->peers_.add_configured(d->config_.peers); !s.ok()) return s;
  if (d->config_.discover)
    if (Status s = Discovery::available(); !s.ok()) return s.with_context("--discover");
  node.executor().set_observer([self = d.get()] { self->on_executor_change(); });
  return d;
}

Dispatcher::~Dispatcher() {
  peers_.stop_discovery();  // no discovery event is posted after this
  peers_.stop_links();
  io_->stop();
  if (io_thread_.joinable()) io_thread_.join();
  peers_.clear();
}

void Dispatcher::on_listening(int port) {
  {
    DeskLock lock(*this);
    if (started_) return;
    started_ = true;
  }
  restore_from_journal();  // before the links start: they relay the tickets handed to peers
  peers_.start_links();
  peers_.start_heartbeat([this] {
    DeskLock lock(*this);
    publish_cluster();
  });
  io_thread_ = std::thread([this] {
    auto guard = net::make_work_guard(*io_);
    io_->run();
  });
  if (const size_t peers = peers_.size())
    revis::log_line("info", "fabric: " + std::to_string(peers) + " peer(s), node " + config_.name + " on port " +
                               std::to_string(port) + ", heartbeat " + std::to_string(config_.heartbeat_ms) + " ms");
  if (config_.discover) peers_.start_discovery(port);
}

// ---------------------------------------------------------------- tickets from clients

node::Outcome<node::JobSpec> Dispatcher::admit_job(const node::Ticket& ticket, Clock::time_point received) const {
  return node_.admit(ticket, received);
}

void Dispatcher::prepare(Record& rec) const {
  rec.job = admit_job(rec.ticket, rec.received);
  const std::string* tier = tier_of(node_.catalog(), rec.ticket);
  if (!tier || !rec.job->ok() || !peers_.kv_prefixes_published(*tier)) return;
  // None while the tier's model is not loaded here: placement asks again.
  if (auto digests = node_.prompt_prefix_digests(**rec.job); !digests.empty()) rec.prompt_digests = std::move(digests);
}

void Dispatcher::on_ticket(const Link& from, node::Ticket ticket, Clock::time_point received) {
  if (ticket.forwarded_by) return run_local_pinned(from, std::move(ticket), received);
  {
    DeskLock lock(*this);
    book_.sweep();
    if (Record* found = record(ticket.id)) return attach_again(*found, from);
  }
  if (answer_from_journal(from, ticket.id, true)) return;
  auto owned = std::make_unique<Record>(std::move(ticket));
  Record& rec = *owned;
  rec.received = received;
  prepare(rec);
  if (auto refused = placer_.admissible(rec)) return from->refuse(rec.ticket.id, *refused);
  rec.travels = forwarded_message(rec.ticket, node_.catalog().digest(), config_.name).size() <= config_.max_message_bytes;
  const std::string id = rec.ticket.id;
  const bool journaled = journal_ && rec.kept;
  std::string journal_text = journaled ? node::ticket_message(rec.ticket) : "";
  DeskLock lock(*this);
  if (Record* found = record(id)) return attach_again(*found, from);  // the same ticket, sent meanwhile
  book_.add(std::move(owned));
  if (!journaled) book_.attach(rec, from, 0, -1);
  auto position = place(rec, false);
  if (!position.ok()) {
    book_.erase(id);
    return from->refuse(id, position.error());
  }
  if (!journaled) return from->send(node::accepted_event(id, *position));
  unannounced_.push_back({journal_->accepted(id, std::move(journal_text)), id, from, *position, {}});
}

void Dispatcher::attach_again(Record& rec, const Link& from) {
  const std::string& id = rec.ticket.id;
  if (book_.follows(rec, from) && rec.where != Where::kDone) {
    from->refuse(id, {ErrorCode::kBadRequest, "ticket " + id + " is already in flight on this connection"});
    return;
  }
  // Its first `accepted` still waits for the journal: so does this one.
  for (const Unannounced& event : unannounced_)
    if (event.id == id && event.client) {
      unannounced_.push_back({event.write, id, from, 0, {}});
      return;
    }
  from->send(node::accepted_event(id, 0));
  attach(rec, from, 0, -1);
}

// A ticket a peer forwarded: it runs here whatever this node's peers are
// doing, and only as long as the forwarding connection lasts. It starts at
// once or not at all: the sender chose this node from a view of its state
// that may be a few milliseconds old, and a ticket refused as busy waits in
// the sender's queue for whichever node frees up first instead of behind
// this node's job.
void Dispatcher::run_local_pinned(const Link& from, node::Ticket ticket, Clock::time_point received) {
  // Only a peer's link (it subscribes first, with the node's token where
  // one is set) may pin a ticket here: such a ticket skips dedup and the
  // journal.
  if (!peers_.subscribed(from))
    return from->refuse(ticket.id, {ErrorCode::kBadRequest, "forwardedBy is for peers: only a connection that sent "
                                                            "`subscribe` first may send it"});
  auto spec = admit_job(ticket, received);
  if (!spec.ok()) return from->refuse(ticket.id, spec.error());
  DeskLock lock(*this);
  if (shutting_down_) return from->refuse(ticket.id, {ErrorCode::kCancelled, "the node is shutting down"});
  if (node_.executor().snapshot().busy())
    return from->refuse(ticket.id, {ErrorCode::kQueueFull, "node " + config_.name +
                                                               " is busy; a forwarded ticket runs only on a node with a free slot"});
  const std::string id = ticket.id;
  if (pinned_.job(from.get(), id))
    return from->refuse(id, {ErrorCode::kBadRequest, "ticket " + id + " is already in flight on this connection"});
  auto admission = pinned_.run(node_.executor(), from, id, std::move(*spec), ticket.streaming, [this, id](const auto& outcome) {
    if (!outcome.ok()) return;
    node::log_job_run(id, outcome->stats);
    peers_.note_job_speed(outcome->stats.gen_tok_s);
  });
  if (!admission.ok()) return from->refuse(id, admission.error());
  from->send(node::accepted_event(id, admission->position));
}

void Dispatcher::on_cancel(const Link& from, const std::string& id) {
  uint64_t local_job = 0;
  {
    DeskLock lock(*this);
    local_job = pinned_.job(from.get(), id);
    if (!local_job) {
      Record* rec = record(id);
      // Cancelling what is not in flight (or not this client's) is ignored:
      // the client may have lost the race with `done`.
      if (!rec || rec->where == Where::kDone || !book_.follows(*rec, from)) return;
      rec->cancel_requested = true;
      local_job = cancel_ticket(*rec);
    }
  }
  if (local_job) node_.executor().cancel(local_job, "cancelled by the client");
}

void Dispatcher::on_resume(const Link& from, const node::ResumeRequest& r) {
  {
    DeskLock lock(*this);
    book_.sweep();
    if (Record* rec = record(r.id)) return attach(*rec, from, r.attempt, r.after_seq);
  }
  if (answer_from_journal(from, r.id, false)) return;
  DeskLock lock(*this);
  if (Record* rec = record(r.id)) return attach(*rec, from, r.attempt, r.after_seq);  // sent meanwhile
  from->refuse(r.id, {ErrorCode::kUnknownTicket, "no ticket " + r.id + " here: never accepted, or its result expired (results are kept " +
                                                     std::to_string(config_.result_ttl_s) + " s); send it again"});
}

void Dispatcher::on_subscribe(const Link& from, const node::SubscribeRequest& request) {
  if (!request.cluster) return peers_.subscribe(from, request.node);
  DeskLock lock(*this);
  feed_.add(from, book_, waiting_.size(), running_labels_);
}

void Dispatcher::on_disconnect(const Link& from) {
  std::vector<uint64_t> cancel_jobs;
  {
    DeskLock lock(*this);
    const bool peer_link = peers_.unsubscribe(from);
    feed_.remove(from);
    cancel_jobs = pinned_.take(from.get());
    for (node::TicketEntry* orphan : book_.detach_everywhere(from)) {
      auto* rec = static_cast<Record*>(orphan);
      if (rec->kept) {
        // A peer that handed its ticket over at its shutdown counts on this
        // node to see it through; it asks for the result when it is back.
        if (!peer_link) watch_orphan(*rec);
        continue;
      }
      rec->orphaned = true;  // nobody can resume it: cancelled now
      if (uint64_t job = cancel_ticket(*rec)) cancel_jobs.push_back(job);
    }
  }
  for (uint64_t job : cancel_jobs) node_.executor().cancel(job, "the client disconnected");
}

// A ticket whose last client left: if none resumes it within the window,
// nobody will read its result, so it is cancelled and forgotten.
void Dispatcher::watch_orphan(Record& rec) {
  const uint64_t watch = ++rec.orphan_watch;
  const std::string id = rec.ticket.id;
  auto timer = std::make_shared<net::steady_timer>(*io_, std::chrono::milliseconds(config_.resume_window_ms));
  timer->async_wait([this, timer, id, watch](const boost::system::error_code& ec) {
    if (ec) return;
    uint64_t local_job = 0;
    {
      DeskLock lock(*this);
      Record* r = record(id);
      if (!r || r->where == Where::kDone || !r->clients.empty() || r->orphan_watch != watch) return;
      r->orphaned = true;
      local_job = cancel_ticket(*r);
    }
    if (local_job) node_.executor().cancel(local_job, "the client disconnected");
  });
}

uint64_t Dispatcher::cancel_ticket(Record& rec) {
  if (rec.where == Where::kLocal) return rec.job_id;
  if (rec.where == Where::kWaiting) {
    std::erase(waiting_, rec.ticket.id);
    if (rec.orphaned) drop(rec.ticket.id);
    else finish(rec, node::error_event(rec.ticket.id, {ErrorCode::kCancelled, "cancelled by the client"}));
    return 0;
  }
  if (rec.where == Where::kPeer) peers_.send(rec.peer, rec.session, json{{"type", "cancel"}, {"ticketID", rec.ticket.id}}.dump());
  return 0;
}

void Dispatcher::attach(Record& rec, const Link& link, int attempt, int64_t after_seq) {
  if (book_.attach(rec, link, attempt, after_seq)) ++rec.orphan_watch;  // a client is back: no orphan
}

TicketRecord* Dispatcher::record(const std::string& id) { return find_record(book_, id); }

std::vector<TicketRecord*> Dispatcher::all_records() const {
  std::vector<Record*> out;
  for (const auto& [id, entry] : book_.entries()) out.push_back(static_cast<Record*>(entry.get()));
  return out;
}

// ---------------------------------------------------------------- placement

node::Outcome<int> Dispatcher::place(Record& rec, bool first) {
  if (shutting_down_) return NodeError{ErrorCode::kCancelled, "the node is shutting down"};
  return placer_.place(book_, waiting_, rec, first);
}

void Dispatcher::send_hand_offs(const std::vector<TicketJournal::HandOff>& hand_offs) {
  int handed = 0;
  for (const TicketJournal::HandOff& h : hand_offs) {
    Record* rec = record(h.id);
    if (!rec || rec->where != Where::kHandedOff) continue;
    if (!h.noted.ok()) {
      revis::log_line("warn", h.noted.message());
      rec->handed_to.clear();
      if (!suspend(*rec)) finish(*rec, node::error_event(h.id, {ErrorCode::kCancelled, "cancelled by the client"}));
      continue;
    }
    ++handed;
    placer_.forward(book_, *rec, h.peer, false);
    if (rec->cancel_requested) cancel_ticket(*rec);  // cancelled while the note was written
  }
  if (handed) revis::log_line("info", "shutdown: " + std::to_string(handed) + " unstarted ticket(s) handed to peers");
}

// ---------------------------------------------------------------- results

void Dispatcher::emit_token(Record& rec, std::string_view piece, std::span<const node::LogprobEntry> logprobs,
                            bool reasoning) {
  book_.emit(rec, node::token_event(rec.ticket.id, book_.next_seq(rec), piece, logprobs, reasoning));
}

void Dispatcher::on_local_text(const std::string& id, uint64_t placement, std::string_view piece,
                               std::span<const node::LogprobEntry> logprobs, bool reasoning) {
  DeskLock lock(*this);
  Record* rec = record(id);
  if (!rec || rec->placement != placement) return;
  emit_token(*rec, piece, logprobs, reasoning);
}

void Dispatcher::on_local_finish(const std::string& id, uint64_t placement, node::Outcome<node::JobResult> outcome) {
  if (outcome.ok()) {
    node::log_job_run(id, outcome->stats);
    peers_.note_job_speed(outcome->stats.gen_tok_s);
  }
  DeskLock lock(*this);
  Record* found = record(id);
  if (!found || found->placement != placement) return;
  Record& rec = *found;
  if (!outcome.ok() && rec.orphaned) return drop(id);
  if (!outcome.ok() && outcome.error().code == ErrorCode::kCancelled && suspend(rec)) return;
  finish(rec, outcome.ok() ? node::done_event(id, *outcome) : node::error_event(id, outcome.error()));
}

// A journaled result is written before anyone hears it: a client never
// holds a result that a restarted node would not know. Until then the
// record is kDone, so nothing else acts on it, and the book sends it (and
// publishes it) once the journal has it.
void Dispatcher::finish(Record& rec, node::TicketEvent terminal) {
  rec.where = Where::kDone;
  rec.job.reset();
  rec.prompt_digests.reset();
  if (journal_ && rec.kept) {
    const TicketJournal::Write write = journal_->finished(rec.ticket.id, terminal.text());
    unannounced_.push_back({write, rec.ticket.id, nullptr, 0, std::move(terminal)});
    return;
  }
  Unannounced now{0, rec.ticket.id, nullptr, 0, std::move(terminal)};
  announce(now);
}

void Dispatcher::announce(Unannounced& event) {
  Record* rec = record(event.id);
  if (event.client) {
    event.client->send(node::accepted_event(event.id, event.position));
    if (rec) attach(*rec, event.client, 0, -1);  // and what it emitted meanwhile
    return;
  }
  if (!rec) return;
  book_.finish(*rec, std::move(event.terminal),
               [this](const node::TicketEntry& entry) REQUIRES(book_.mu) { publish(static_cast<const Record&>(entry)); });
}

void Dispatcher::settle() {
  const TicketJournal::Write written = journal_ ? journal_->flush() : 0;
  MutexLock lock(book_.mu);
  // In order; one whose write came after `written` stays for the settle()
  // of the entry point that queued it.
  std::deque<Unannounced> later;
  for (Unannounced& event : unannounced_) {
    if (event.write <= written) announce(event);
    else later.push_back(std::move(event));
  }
  unannounced_.swap(later);
}

bool Dispatcher::answer_from_journal(const Link& link, const std::string& id, bool resent) {
  if (!journal_) return false;
  auto stored = journal_->result(id, config_.result_ttl_s);
  if (!stored.ok()) revis::log_line("warn", stored.status().message());
  if (!stored.ok() || stored->empty()) return false;
  if (resent) link->send(node::accepted_event(id, 0));
  link->send(node::TicketEvent::read(std::move(*stored)));
  return true;
}

void Dispatcher::drop(const std::string& id) {
  const node::TicketEntry* entry = book_.find(id);
  const bool journaled = journal_ && entry && entry->kept;
  book_.erase(id);
  if (journaled) journal_->forget(id);
}

void Dispatcher::retry(Record& rec, const std::string& reason) {
  const std::string id = rec.ticket.id;
  if (rec.cancel_requested || rec.orphaned) {
    if (rec.orphaned) return drop(id);
    return finish(rec, node::error_event(id, {ErrorCode::kCancelled, "cancelled by the client"}));
  }
  if (rec.attempt >= config_.max_attempts)
    return finish(rec, node::error_event(id, {ErrorCode::kInternal, "gave up after " + std::to_string(rec.attempt) +
                                                                      " attempts; the last: " + reason}));
  book_.restart(rec, reason);
  revis::log_line("warn", "ticket " + id + ": " + reason + "; attempt " + std::to_string(rec.attempt));
  if (journal_ && rec.kept) journal_->attempt(id, rec.attempt);
  auto placed = place(rec, true);
  if (!placed.ok() && !suspend(rec)) finish(rec, node::error_event(id, placed.error()));
}

bool Dispatcher::suspend(Record& rec) { return shutting_down_ && journal_ && journal_->suspend(book_, waiting_, rec); }

void Dispatcher::restore_from_journal() {
  if (!journal_) return;
  auto read = journal_->load(config_.result_ttl_s);
  if (!read.ok()) return revis::log_line("warn", read.status().message());
  for (TicketJournal::ReadBack& r : *read)
    if (r.result.empty()) prepare(*r.record);
  DeskLock lock(*this);
  const TicketJournal::Restored restored =
      journal_->restore(book_, std::move(*read), [this](const std::string& key) { return peers_.contains(key); });
  // Put at the head of the queue (the limit does not apply to accepted
  // tickets), newest first, so that they run oldest first.
  for (auto it = restored.to_run.rbegin(); it != restored.to_run.rend(); ++it) retry(**it, "the accepting node restarted");
  revis::log_line("info", "journal " + journal_->path() + ": " + std::to_string(restored.to_run.size()) +
                             " unfinished ticket(s) resumed, " + std::to_string(restored.handed) + " handed to peers, " +
                             std::to_string(restored.kept) + " result(s) kept");
}

// ---------------------------------------------------------------- peers

void Dispatcher::on_peer_up(const std::string& key, uint64_t link_id, uint64_t session) {
  DeskLock lock(*this);  // a link changes with the book's lock held (fabric/peer_set.h)
  peers_.link_up(key, link_id, session);
}

void Dispatcher::on_peer_message(const std::string& key, uint64_t link_id, uint64_t session, const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string()) return;
  const std::string type = j["type"].get<std::string>();
  DeskLock lock(*this);
  auto heard = peers_.hear(key, link_id, session, j);
  if (!heard) return;
  if (heard->new_state) {
    const PeerView& p = *heard->new_state;
    if (!shutting_down_ && !p.is_self && p.state.catalog == node_.catalog().digest()) placer_.relay_handed(book_, p);
    if (heard->busy_changed) publish_cluster();
    if (!shutting_down_ && !p.state.busy) placer_.offload(book_, waiting_);
    return;
  }
  if (j.contains("ticketID") && j["ticketID"].is_string()) on_peer_ticket_event(key, session, type, j, text);
}

void Dispatcher::on_peer_ticket_event(const std::string& key, uint64_t session, const std::string& type, const json& j,
                                      const std::string& text) {
  const std::string id = j["ticketID"].get<std::string>();
  Record* found = record(id);
  if (!found) return;
  Record& rec = *found;
  if (rec.where != Where::kPeer || rec.peer != key || rec.session != session) return;
  handed_over_.notify_all();  // whatever it says, a handed ticket is settled with the peer
  if (type == "accepted") {
    rec.peer_has_it = true;
  } else if (type == "token") {
    const node::TicketEvent token = node::TicketEvent::read(text, j);  // renumbered here: a new event
    emit_token(rec, token.piece(), token.logprobs(), token.reasoning());
  } else if (type == "done") {
    peers_.ticket_ended(key, session);
    finish(rec, node::TicketEvent::read(text, j));
  } else if (type == "error") {
    peers_.ticket_ended(key, session);
    const auto code = node::error_code_from_name(j.value("code", "internal")).value_or(ErrorCode::kInternal);
    const std::string why = "node " + peers_.name_of(key) + " answered " + j.value("code", "?") + ": " + j.value("message", "");
    if (code == ErrorCode::kQueueFull) {
      // Not a failed run: the peer was busy after all, as its next state
      // will say. Until then it is busy here too, and the ticket is back in
      // line. A handed ticket it refused is not there: it may run anywhere.
      peers_.mark_busy(key);
      if (!rec.handed_to.empty()) {
        rec.handed_to.clear();
        if (journal_) journal_->handed(id, "");
      }
      auto placed = place(rec, true);
      if (!placed.ok() && !suspend(rec)) finish(rec, node::error_event(id, placed.error()));
    } else if (!rec.handed_to.empty() || (rec.cancel_requested && code == ErrorCode::kCancelled)) {
      // A handed ticket is the peer's: its answer is the result.
      finish(rec, node::TicketEvent::read(text, j));
    } else if (rec.orphaned) {
      drop(id);
    } else if (worth_another_node(code)) {
      retry(rec, why);
    } else {
      finish(rec, node::TicketEvent::read(text, j));
    }
  }
}

void Dispatcher::on_peer_down(const std::string& key, uint64_t link_id, uint64_t session, const std::string& why) {
  DeskLock lock(*this);
  if (!peers_.current(key, link_id)) return;
  if (peers_.link_down(key, link_id, session, why)) publish_cluster();
  std::vector<Record*> lost;
  for (Record* rec : all_records())
    if (rec->where == Where::kPeer && rec->peer == key && rec->session == session) lost.push_back(rec);
  const std::string name = peers_.name_of(key);
  for (Record* rec : lost) {
    if (!rec->handed_to.empty()) {
      // Only that peer may run it: it waits for the link to come back.
      rec->where = Where::kHandedOff;
      ++rec->placement;
      continue;
    }
    retry(*rec, "node " + name + " was lost (" + why + ")");
  }
  handed_over_.notify_all();
  peers_.forget_if_gone(key);
}

// ---------------------------------------------------------------- this node

void Dispatcher::on_executor_change() {
  const node::ExecutorSnapshot snap = node_.executor().snapshot();
  peers_.note_executor(snap.busy());
  peers_.push_state();
  DeskLock lock(*this);
  // A ticket that started here since the last look is published as running.
  std::set<std::string> running;
  for (const node::CurrentJob& job : snap.running) running.insert(job.label);
  for (const std::string& label : running)
    if (!running_labels_.contains(label))
      if (const Record* rec = record(label); rec && rec->where == Where::kLocal) publish(*rec);
  running_labels_ = std::move(running);
  publish_cluster();
}

void Dispatcher::on_shutdown() {
  peers_.stop_discovery();  // first: a node shutting down is not one to find
  std::vector<TicketJournal::HandOff> hand_offs;
  {
    DeskLock lock(*this);
    shutting_down_ = true;
    if (journal_)  // before the executor cancels the queued jobs
      hand_offs = journal_->choose_hand_offs(book_, waiting_, node_.executor(), peers_.views(), node_.catalog());
  }
  if (journal_) journal_->note(hand_offs);
  DeskLock lock(*this);
  send_hand_offs(hand_offs);
  waiting_.clear();
  std::vector<Record*> elsewhere;  // collected first: finishing an OpenAI request forgets it
  // A handed ticket is the peer's now: it is neither cancelled nor ended here.
  for (Record* rec : all_records())
    if ((rec->where == Where::kPeer && rec->handed_to.empty()) || rec->where == Where::kWaiting) elsewhere.push_back(rec);
  for (Record* rec : elsewhere) {
    if (rec->where == Where::kPeer) cancel_ticket(*rec);
    if (!suspend(*rec)) finish(*rec, node::error_event(rec->ticket.id, {ErrorCode::kCancelled, "the node is shutting down"}));
  }
}

void Dispatcher::on_stopped() {
  DeskLock lock(*this);
  shutting_down_ = true;
  // Tickets handed to peers: until each peer has said it holds them (or its
  // link dropped), so that they run there while this node is down.
  const auto deadline = Clock::now() + kHandOffWait;
  auto unsettled = [](const Record* r) { return r->where == Where::kPeer && !r->handed_to.empty() && !r->peer_has_it; };
  while (std::ranges::any_of(all_records(), unsettled))
    if (!handed_over_.wait_until(book_.mu, deadline)) break;
  peers_.clear_subscribers();
  feed_.clear();
  pinned_.clear();
  book_.detach_all();
  std::erase_if(unannounced_, [](const Unannounced& event) { return event.client != nullptr; });  // no link is used now
}

// ---------------------------------------------------------------- the cluster feed

std::string Dispatcher::cluster_json() {
  DeskLock lock(*this);
  return feed_.cluster_view(book_, waiting_.size()).dump(-1, ' ', false, json::error_handler_t::replace);
}

void Dispatcher::publish_cluster() { feed_.publish_cluster(book_, waiting_.size()); }

void Dispatcher::publish(const Record& rec) { feed_.publish(rec, running_labels_); }

}  // namespace revis::fabric
