#include "fabric/dispatcher.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/log.h"

namespace revis::fabric {
namespace {

namespace net = boost::asio;
using nlohmann::json;
using node::Clock;
using node::ErrorCode;
using node::NodeError;

std::string random_instance() {
  std::random_device rd;
  std::mt19937_64 rng((uint64_t(rd()) << 32) ^ rd());
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The ticket as sent to a peer: pinned to this node's catalogue, and
// marked so that the peer runs it itself.
std::string forwarded_message(node::Ticket t, const std::string& catalog, std::optional<std::string> forwarded_by) {
  t.catalog = catalog;
  t.forwarded_by = forwarded_by;
  return node::ticket_message(t);
}

// Errors of a forwarded run after which the ticket may well succeed on
// another node; the rest (bad_request, unknown_task, ...) are the ticket's.
bool worth_another_node(ErrorCode code) {
  return code == ErrorCode::kModelUnavailable || code == ErrorCode::kInternal || code == ErrorCode::kCancelled ||
         code == ErrorCode::kCatalogMismatch;
}

// How long a stopping node waits for its peers to take the tickets it
// handed them; past that, its next start sends them again.
constexpr auto kHandOffWait = std::chrono::seconds(2);

// How a peer became one, as the cluster view shows it.
constexpr const char* kFoundInConfig = "config";  // --peer, or peers = [...]
constexpr const char* kFoundByMdns = "mdns";      // --discover

}  // namespace

// A ticket in the book, and where it runs.
struct Dispatcher::Record : node::TicketEntry {
  explicit Record(node::Ticket t) : ticket(std::move(t)) {
    id = ticket.id;
    // A ticket is journaled and its result kept for clients that resend or
    // resume it; an OpenAI request is neither, its HTTP client cannot come
    // back for it.
    kept = !ticket.openai;
  }
  size_t ticket_bytes() const override {
    size_t bytes = sizeof(Record) - sizeof(node::TicketEntry) + ticket.task.size();
    for (const auto& [name, value] : ticket.args) bytes += name.size() + value.size();
    return bytes;
  }

  node::Ticket ticket;
  Clock::time_point received;
  int64_t received_unix_ms = unix_ms_now();
  // Small enough for a peer's message limit; otherwise it runs here.
  bool travels = true;
  // The prompt's prefix digests (Node::prompt_prefix_digests), computed the
  // first time a candidate node publishes KV prefixes for its tier.
  std::optional<std::vector<std::string>> prompt_digests;
  uint64_t placement = 0;  // bumped at every placement; callbacks of an earlier one are ignored
  // kWaiting: in waiting_, for a peer (this node does not serve its tier).
  // kSuspended: the node is shutting down before it ran; the journal keeps
  // it unfinished, and the next start runs it (suspend()).
  // kHandedOff: handed to peer `handed_to` at an earlier shutdown; waits for
  // that peer's link to relay it (relay_handed()).
  enum class Where { kLocal, kPeer, kWaiting, kSuspended, kHandedOff, kDone } where = Where::kLocal;
  uint64_t job_id = 0;     // kLocal: the executor's job
  std::string peer;        // kPeer: which peer, on which link session
  uint64_t session = 0;
  bool cancel_requested = false;
  bool orphaned = false;    // cancelled because no client came back: not kept as a result
  uint64_t orphan_watch = 0;
  std::string handed_to;    // the peer it was handed to at a shutdown; it runs nowhere else
  bool peer_has_it = false;  // kPeer: the peer answered `accepted`
};

struct Dispatcher::Peer {
  std::string key;  // HOST:PORT as configured or resolved
  const char* found = kFoundInConfig;
  std::string service;  // the mDNS service that names this peer, while one does
  uint64_t link_id = 0;
  std::unique_ptr<PeerLink> link;
  bool up = false;
  uint64_t session = 0;
  bool known = false;  // a state has arrived on this session
  NodeState state;
  bool is_self = false;
  Clock::time_point last_heard{}, idle_since = Clock::now();
  int in_flight = 0;  // tickets this node sent there that have not ended
  std::string last_error;
};

// The journal holds each result: a resume of a finished ticket gets its
// final event, not its token events.
Dispatcher::Dispatcher(node::Node& node, std::unique_ptr<Journal> journal)
    : node_(node),
      config_(node.config()),
      instance_(random_instance()),
      io_(std::make_unique<net::io_context>()),
      book_({std::chrono::seconds(config_.result_ttl_s), size_t(config_.max_kept_results),
             size_t(config_.max_kept_results_mb) << 20, journal == nullptr}),
      journal_(std::move(journal)) {}

Result<std::unique_ptr<Dispatcher>> Dispatcher::create(node::Node& node) {
  std::unique_ptr<Journal> journal;
  if (!node.config().journal.empty()) {
    auto opened = Journal::open(node.config().journal);
    if (!opened.ok()) return opened.status();
    journal = std::move(*opened);
  }
  std::unique_ptr<Dispatcher> d(new Dispatcher(node, std::move(journal)));
  MutexLock lock(d->book_.mu);  // nothing else holds it yet; taken for the checker
  for (const std::string& text : d->config_.peers) {
    auto hp = node::parse_host_port(text, 8080);
    if (!hp.ok()) return hp.status().with_context("--peer");
    d->add_peer(*hp, kFoundInConfig);
  }
  if (d->config_.discover)
    if (Status s = Discovery::available(); !s.ok()) return s.with_context("--discover");
  node.executor().set_observer([self = d.get()] { self->on_executor_change(); });
  return d;
}

Dispatcher::~Dispatcher() {
  discovery_.reset();  // no discovery event is posted after this
  {
    MutexLock lock(book_.mu);
    for (auto& [key, peer] : peers_) peer->link->stop();
  }
  io_->stop();
  if (io_thread_.joinable()) io_thread_.join();
  MutexLock lock(book_.mu);
  peers_.clear();
}

void Dispatcher::on_listening(int port) {
  {
    MutexLock lock(book_.mu);
    if (started_) return;
    started_ = true;
    restore_from_journal();
    for (auto& [key, peer] : peers_) peer->link->start();
  }
  net::post(*io_, [this] { heartbeat_tick(); });
  io_thread_ = std::thread([this] {
    auto guard = net::make_work_guard(*io_);
    io_->run();
  });
  size_t peers;
  {
    MutexLock lock(book_.mu);
    peers = peers_.size();
  }
  if (peers)
    revis::log_line("info", "fabric: " + std::to_string(peers) + " peer(s), node " + config_.name + " on port " +
                               std::to_string(port) + ", heartbeat " + std::to_string(config_.heartbeat_ms) + " ms");
  if (config_.discover) start_discovery(port);
}

// ---------------------------------------------------------------- tickets from clients

void Dispatcher::on_ticket(const Link& from, node::Ticket ticket, Clock::time_point received) {
  if (ticket.forwarded_by) return run_local_pinned(from, std::move(ticket), received);
  MutexLock lock(book_.mu);
  book_.sweep();
  if (Record* found = record(ticket.id)) {
    Record& rec = *found;
    if (book_.follows(rec, from) && rec.where != Record::Where::kDone) {
      from->refuse(ticket.id, {ErrorCode::kBadRequest, "ticket " + ticket.id + " is already in flight on this connection"});
      return;
    }
    // The same ticketID again (a client retrying after a lost connection):
    // the one ticket, not a second run.
    from->send(node::accepted_event(ticket.id, 0));
    attach(rec, from, 0, -1);
    return;
  }
  if (answer_from_journal(from, ticket.id, true)) return;
  if (auto refused = admissible(ticket, received)) return from->refuse(ticket.id, *refused);
  auto owned = std::make_unique<Record>(std::move(ticket));
  Record& rec = *owned;
  rec.received = received;
  rec.travels = forwarded_message(rec.ticket, node_.catalog().digest(), config_.name).size() <= config_.max_message_bytes;
  const std::string id = rec.ticket.id;
  book_.add(std::move(owned));
  book_.attach(rec, from, 0, -1);
  auto position = place(rec, false);
  if (!position.ok()) {
    book_.erase(id);
    return from->refuse(id, position.error());
  }
  if (journal_ && rec.kept)
    if (Status s = journal_->accepted(id, node::ticket_message(rec.ticket)); !s.ok()) revis::log_line("warn", s.message());
  from->send(node::accepted_event(id, *position));
}

// A ticket a peer forwarded: it runs here whatever this node's peers are
// doing, and only as long as the forwarding connection lasts. It starts at
// once or not at all: the sender chose this node from a view of its state
// that may be a few milliseconds old, and a ticket refused as busy waits in
// the sender's queue for whichever node frees up first instead of behind
// this node's job.
void Dispatcher::run_local_pinned(const Link& from, node::Ticket ticket, Clock::time_point received) {
  {
    // Only a peer's link (it subscribes first, with the node's token where
    // one is set) may pin a ticket here: such a ticket skips dedup and the
    // journal.
    MutexLock lock(book_.mu);
    if (std::find(subscribers_.begin(), subscribers_.end(), from) == subscribers_.end())
      return from->refuse(ticket.id, {ErrorCode::kBadRequest, "forwardedBy is for peers: only a connection that sent "
                                                              "`subscribe` first may send it"});
  }
  auto spec = node_.admit(ticket, received);
  if (!spec.ok()) return from->refuse(ticket.id, spec.error());
  MutexLock lock(book_.mu);
  if (shutting_down_) return from->refuse(ticket.id, {ErrorCode::kCancelled, "the node is shutting down"});
  if (const node::ExecutorSnapshot snap = node_.executor().snapshot(); !snap.ready || snap.current || snap.queue_length > 0)
    return from->refuse(ticket.id, {ErrorCode::kQueueFull, "node " + config_.name + " is busy; a forwarded ticket runs only on an idle node"});
  const std::string id = ticket.id;
  if (pinned_.job(from.get(), id))
    return from->refuse(id, {ErrorCode::kBadRequest, "ticket " + id + " is already in flight on this connection"});
  auto admission = pinned_.run(node_.executor(), from, id, std::move(*spec), ticket.streaming, [this, id](const auto& outcome) {
    if (!outcome.ok()) return;
    node::log_job_run(id, outcome->stats);
    MutexLock lock(book_.mu);
    tok_per_s_ = outcome->stats.gen_tok_s;
  });
  if (!admission.ok()) return from->refuse(id, admission.error());
  from->send(node::accepted_event(id, admission->position));
}

void Dispatcher::on_cancel(const Link& from, const std::string& id) {
  uint64_t local_job = 0;
  {
    MutexLock lock(book_.mu);
    local_job = pinned_.job(from.get(), id);
    if (!local_job) {
      Record* rec = record(id);
      // Cancelling what is not in flight (or not this client's) is ignored:
      // the client may have lost the race with `done`.
      if (!rec || rec->where == Record::Where::kDone || !book_.follows(*rec, from)) return;
      rec->cancel_requested = true;
      local_job = cancel_ticket(*rec);
    }
  }
  if (local_job) node_.executor().cancel(local_job, "cancelled by the client");
}

void Dispatcher::on_resume(const Link& from, const node::ResumeRequest& r) {
  MutexLock lock(book_.mu);
  book_.sweep();
  Record* rec = record(r.id);
  if (!rec && answer_from_journal(from, r.id, false)) return;
  if (!rec)
    return from->refuse(r.id, {ErrorCode::kUnknownTicket, "no ticket " + r.id + " here: never accepted, or its result expired (results are kept " +
                                                              std::to_string(config_.result_ttl_s) + " s); send it again"});
  attach(*rec, from, r.attempt, r.after_seq);
}

void Dispatcher::on_subscribe(const Link& from, const node::SubscribeRequest& request) {
  MutexLock lock(book_.mu);
  if (request.cluster) {
    feed_.add(from, node_.catalog().digest(), node_.catalog().canonical_json());
    from->send(ClusterFeed::cluster_event(cluster_view()));
    std::vector<Record*> kept = all_records();
    std::sort(kept.begin(), kept.end(), [](const Record* a, const Record* b) { return a->received_unix_ms < b->received_unix_ms; });
    constexpr size_t kMostRecent = 200;
    if (kept.size() > kMostRecent) kept.erase(kept.begin(), kept.end() - kMostRecent);
    for (const Record* rec : kept) from->send(ClusterFeed::ticket_event(view_of(*rec)));
    return;
  }
  if (std::find(subscribers_.begin(), subscribers_.end(), from) == subscribers_.end()) subscribers_.push_back(from);
  revis::log_line("info", "fabric: " + (request.node.empty() ? std::string("a peer") : "peer " + request.node) +
                             " subscribed to this node's state");
  from->send(node::TicketEvent::other(
      json{{"type", "peer"}, {"status", to_json(local_state())}}.dump(-1, ' ', false, json::error_handler_t::replace)));
}

void Dispatcher::on_disconnect(const Link& from) {
  std::vector<uint64_t> cancel_jobs;
  {
    MutexLock lock(book_.mu);
    const bool peer_link = std::find(subscribers_.begin(), subscribers_.end(), from) != subscribers_.end();
    std::erase(subscribers_, from);
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
      MutexLock lock(book_.mu);
      Record* r = record(id);
      if (!r || r->where == Record::Where::kDone || !r->clients.empty() || r->orphan_watch != watch) return;
      r->orphaned = true;
      local_job = cancel_ticket(*r);
    }
    if (local_job) node_.executor().cancel(local_job, "the client disconnected");
  });
}

uint64_t Dispatcher::cancel_ticket(Record& rec) {
  if (rec.where == Record::Where::kLocal) return rec.job_id;
  if (rec.where == Record::Where::kWaiting) {
    std::erase(waiting_, rec.ticket.id);
    if (rec.orphaned) drop(rec.ticket.id);
    else finish(rec, node::error_event(rec.ticket.id, {ErrorCode::kCancelled, "cancelled by the client"}));
    return 0;
  }
  if (rec.where == Record::Where::kPeer) {
    if (auto it = peers_.find(rec.peer); it != peers_.end())
      it->second->link->send(rec.session, json{{"type", "cancel"}, {"ticketID", rec.ticket.id}}.dump());
  }
  return 0;
}

void Dispatcher::attach(Record& rec, const Link& link, int attempt, int64_t after_seq) {
  if (book_.attach(rec, link, attempt, after_seq)) ++rec.orphan_watch;  // a client is back: no orphan
}

Dispatcher::Record* Dispatcher::record(const std::string& id) { return static_cast<Record*>(book_.find(id)); }

std::vector<Dispatcher::Record*> Dispatcher::all_records() const {
  std::vector<Record*> out;
  for (const auto& [id, entry] : book_.entries()) out.push_back(static_cast<Record*>(entry.get()));
  return out;
}

// ---------------------------------------------------------------- placement

std::vector<Candidate> Dispatcher::candidates(const std::string& tier, std::vector<Peer*>& peers, bool include_self) const {
  std::vector<Candidate> out;
  peers.clear();
  if (include_self) {
    const node::ExecutorSnapshot snap = node_.executor().snapshot();
    const NodeState me = local_state();
    out.push_back({node_.serves_tier(tier), snap.ready && !snap.current && snap.queue_length == 0, me.has_loaded(tier),
                   self_idle_since_});
    peers.push_back(nullptr);
  }
  for (const auto& [key, p] : peers_) {
    const bool capable = p->up && p->known && !p->is_self && p->state.catalog == node_.catalog().digest() &&
                         p->state.serves(tier) && !shutting_down_;
    out.push_back({capable, !p->state.busy && p->in_flight == 0, p->state.has_loaded(tier), p->idle_since});
    peers.push_back(p.get());
  }
  return out;
}

node::Outcome<int> Dispatcher::place(Record& rec, bool first) {
  if (shutting_down_) return NodeError{ErrorCode::kCancelled, "the node is shutting down"};
  const std::string* tier = tier_of(rec.ticket);
  if (!tier) return NodeError{ErrorCode::kUnknownTask, "no task \"" + rec.ticket.task + "\" in this node's catalogue"};
  std::vector<Peer*> peers;
  std::vector<Candidate> cands = candidates(*tier, peers, true);
  for (size_t i = 0; i < cands.size(); ++i) cands[i].capable = cands[i].capable && (rec.travels || !peers[i]);
  weigh_cached_prefixes(rec, *tier, peers, cands);
  if (auto best = choose_node(cands); best && peers[*best]) {
    forward(rec, *peers[*best]);
    return 0;
  }
  if (node_.serves_tier(*tier)) return submit_local(rec, first);
  // Only peers serve this tier: the ticket waits here for one to be idle.
  if (!rec.travels)
    return NodeError{ErrorCode::kTooLong, "tier " + *tier + " runs only on peers, and this ticket is too large to send one (limit " +
                                              std::to_string(config_.max_message_bytes) + " bytes)"};
  if (!first && waiting_.size() >= static_cast<size_t>(config_.queue_limit))
    return NodeError{ErrorCode::kQueueFull, "the queue for tier " + *tier + " is full (" +
                                                std::to_string(waiting_.size()) + " tickets waiting for a peer)"};
  rec.where = Record::Where::kWaiting;
  ++rec.placement;
  if (first) waiting_.push_front(rec.ticket.id);
  else waiting_.push_back(rec.ticket.id);
  publish(rec);
  return static_cast<int>(waiting_.size());
}

void Dispatcher::weigh_cached_prefixes(Record& rec, const std::string& tier, const std::vector<Peer*>& peers,
                                       std::vector<Candidate>& cands) {
  const NodeState me = local_state();
  std::vector<const std::vector<std::string>*> published(cands.size(), nullptr);
  bool any = false;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!cands[i].capable || !cands[i].idle) continue;
    const auto& by_tier = peers[i] ? peers[i]->state.kv_prefixes : me.kv_prefixes;
    if (auto it = by_tier.find(tier); it != by_tier.end() && !it->second.empty()) {
      published[i] = &it->second;
      any = true;
    }
  }
  if (!any) return;
  if (!rec.prompt_digests) {
    auto spec = node_.admit(rec.ticket, rec.received);
    rec.prompt_digests = spec.ok() ? node_.prompt_prefix_digests(*spec) : std::vector<std::string>();
  }
  for (size_t i = 0; i < cands.size(); ++i)
    if (published[i]) cands[i].cached_tokens = cached_prefix_tokens(*rec.prompt_digests, node::kPrefixDigestBlock, *published[i]);
}

const std::string* Dispatcher::tier_of(const node::Ticket& ticket) const {
  if (ticket.openai) return &ticket.openai->tier;
  const node::Task* task = node_.catalog().find(ticket.task);
  return task ? &task->tier : nullptr;
}

// node.admit(), except that a tier this node does not serve is fine when a
// peer with the same catalogue serves it: the ticket will run there.
std::optional<NodeError> Dispatcher::admissible(const node::Ticket& ticket, Clock::time_point received) const {
  auto spec = node_.admit(ticket, received);
  if (spec.ok()) return std::nullopt;
  const node::Task* task = node_.catalog().find(ticket.task);
  if (spec.error().code != ErrorCode::kModelUnavailable || !task || node_.serves_tier(task->tier)) return spec.error();
  auto prompt = node_.catalog().render(*task, ticket.args);
  if (!prompt.ok()) return prompt.error();
  for (const auto& [key, p] : peers_)
    if (p->known && !p->is_self && p->state.catalog == node_.catalog().digest() && p->state.serves(task->tier))
      return std::nullopt;
  return NodeError{ErrorCode::kModelUnavailable,
                   "task " + task->name + " runs on tier " + task->tier + ", which neither this node nor a reachable peer serves"};
}

node::Outcome<int> Dispatcher::submit_local(Record& rec, bool first) {
  auto spec = node_.admit(rec.ticket, rec.received);
  if (!spec.ok()) return spec.error();
  const std::string id = rec.ticket.id;
  const uint64_t placement = ++rec.placement;
  node::JobCallbacks callbacks;
  if (rec.ticket.streaming) {
    callbacks.on_text = [this, id, placement](std::string_view piece, std::span<const node::LogprobEntry> logprobs) {
      on_local_text(id, placement, piece, logprobs, false);
    };
    callbacks.on_reasoning = [this, id, placement](std::string_view piece) {
      on_local_text(id, placement, piece, {}, true);
    };
  }
  callbacks.on_finish = [this, id, placement](node::Outcome<node::JobResult> outcome) {
    on_local_finish(id, placement, std::move(outcome));
  };
  auto admission = node_.executor().submit(std::move(*spec), std::move(callbacks), first);
  if (!admission.ok()) return admission.error();
  rec.where = Record::Where::kLocal;
  rec.job_id = admission->job_id;
  rec.peer.clear();
  publish(rec);
  return admission->position;
}

void Dispatcher::forward(Record& rec, Peer& peer, bool pinned) {
  rec.where = Record::Where::kPeer;
  ++rec.placement;
  rec.peer = peer.key;
  rec.session = peer.session;
  rec.job_id = 0;
  rec.peer_has_it = false;
  ++peer.in_flight;
  peer.link->send(peer.session, forwarded_message(rec.ticket, node_.catalog().digest(),
                                                  pinned ? std::optional(config_.name) : std::nullopt));
  publish(rec);
}

void Dispatcher::hand_off_unstarted() {
  if (!journal_) return;
  std::map<std::string, int> given;  // by peer: the tickets are spread over the live ones
  // The lambdas run under the caller's lock.
  auto pick = [&](const std::string& tier) REQUIRES(book_.mu) -> Peer* {
    Peer* best = nullptr;
    for (const auto& [key, p] : peers_) {
      if (!p->up || !p->known || p->is_self || p->state.catalog != node_.catalog().digest() || !p->state.serves(tier)) continue;
      if (!best || p->in_flight + given[key] < best->in_flight + given[best->key]) best = p.get();
    }
    return best;
  };
  auto movable = [](const Record& rec) { return rec.kept && rec.travels && !rec.cancel_requested && !rec.orphaned; };
  int handed = 0;
  auto hand = [&](Record& rec, Peer& peer) REQUIRES(book_.mu) {
    // Noted first: should this node stop before the peer has it, the next
    // start sends it there again, and the peer runs it once either way.
    if (Status s = journal_->handed(rec.ticket.id, peer.key); !s.ok()) {
      revis::log_line("warn", s.message());
      suspend(rec);
      return;
    }
    rec.handed_to = peer.key;
    ++given[peer.key];
    ++handed;
    forward(rec, peer, false);
  };
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Record& rec = *record(*it);
    const std::string* tier = tier_of(rec.ticket);
    Peer* peer = tier && movable(rec) ? pick(*tier) : nullptr;
    if (!peer) {
      ++it;
      continue;
    }
    it = waiting_.erase(it);
    hand(rec, *peer);
  }
  while (auto job = node_.executor().take_queued([&](const node::JobSpec& spec) REQUIRES(book_.mu) {
           const Record* rec = record(spec.label);
           return rec && rec->where == Record::Where::kLocal && movable(*rec) && pick(spec.tier) != nullptr;
         }))
    hand(*record(job->spec.label), *pick(job->spec.tier));
  if (handed) revis::log_line("info", "shutdown: " + std::to_string(handed) + " unstarted ticket(s) handed to peers");
}

void Dispatcher::relay_handed(Peer& peer) {
  if (shutting_down_) return;
  for (Record* rec : all_records())
    if (rec->where == Record::Where::kHandedOff && rec->handed_to == peer.key) forward(*rec, peer, false);
}

// Moves waiting tickets to idle peers, best peer first, until no peer is
// idle or nothing they can run is waiting.
void Dispatcher::offload() {
  if (shutting_down_) return;
  std::vector<Peer*> peers;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Record& rec = *record(*it);
    const std::string* tier = tier_of(rec.ticket);
    std::optional<size_t> best;
    if (tier) {
      std::vector<Candidate> cands = candidates(*tier, peers, false);
      weigh_cached_prefixes(rec, *tier, peers, cands);
      best = choose_node(cands);
    }
    if (!best) {
      ++it;
      continue;
    }
    it = waiting_.erase(it);
    forward(rec, *peers[*best]);
  }
  while (true) {
    // Any tier: a peer is a candidate when idle; the job taken must suit it.
    std::vector<Candidate> cands = candidates("", peers, false);
    for (size_t i = 0; i < cands.size(); ++i) cands[i].capable = peers[i]->up && peers[i]->known && !peers[i]->is_self &&
                                                                   peers[i]->state.catalog == node_.catalog().digest();
    auto best = choose_node(cands);
    if (!best) return;
    Peer& peer = *peers[*best];
    auto job = node_.executor().take_queued([&](const node::JobSpec& spec) REQUIRES(book_.mu) {  // called under this lock
      if (!peer.state.serves(spec.tier)) return false;
      const Record* rec = record(spec.label);
      return rec && rec->where == Record::Where::kLocal && rec->travels;
    });
    if (!job) return;
    forward(*record(job->spec.label), peer);
  }
}

// ---------------------------------------------------------------- results

void Dispatcher::emit_token(Record& rec, std::string_view piece, std::span<const node::LogprobEntry> logprobs,
                            bool reasoning) {
  book_.emit(rec, node::token_event(rec.ticket.id, book_.next_seq(rec), piece, logprobs, reasoning));
}

void Dispatcher::on_local_text(const std::string& id, uint64_t placement, std::string_view piece,
                               std::span<const node::LogprobEntry> logprobs, bool reasoning) {
  MutexLock lock(book_.mu);
  Record* rec = record(id);
  if (!rec || rec->placement != placement) return;
  emit_token(*rec, piece, logprobs, reasoning);
}

void Dispatcher::on_local_finish(const std::string& id, uint64_t placement, node::Outcome<node::JobResult> outcome) {
  if (outcome.ok()) node::log_job_run(id, outcome->stats);
  MutexLock lock(book_.mu);
  if (outcome.ok()) tok_per_s_ = outcome->stats.gen_tok_s;
  Record* found = record(id);
  if (!found || found->placement != placement) return;
  Record& rec = *found;
  if (!outcome.ok() && rec.orphaned) return drop(id);
  if (!outcome.ok() && outcome.error().code == ErrorCode::kCancelled && suspend(rec)) return;
  finish(rec, outcome.ok() ? node::done_event(id, *outcome) : node::error_event(id, outcome.error()));
}

void Dispatcher::finish(Record& rec, node::TicketEvent terminal) {
  rec.where = Record::Where::kDone;
  book_.finish(rec, std::move(terminal), [this](const node::TicketEntry& entry) REQUIRES(book_.mu) {
    publish(static_cast<const Record&>(entry));
    // Journaled before anyone hears it: a client never holds a result that
    // a restarted node would not know.
    if (journal_ && entry.kept)
      if (Status s = journal_->finished(entry.id, entry.terminal.text(), unix_ms_now()); !s.ok()) revis::log_line("warn", s.message());
  });
}

bool Dispatcher::answer_from_journal(const Link& link, const std::string& id, bool resent) {
  if (!journal_) return false;
  auto stored = journal_->result(id, unix_ms_now() - int64_t(config_.result_ttl_s) * 1000);
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
  if (journaled)
    if (Status s = journal_->forget(id); !s.ok()) revis::log_line("warn", s.message());
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
  if (journal_ && rec.kept)
    if (Status s = journal_->attempt(id, rec.attempt); !s.ok()) revis::log_line("warn", s.message());
  auto placed = place(rec, true);
  if (!placed.ok() && !suspend(rec)) finish(rec, node::error_event(id, placed.error()));
}

bool Dispatcher::suspend(Record& rec) {
  if (!shutting_down_ || !journal_ || !rec.kept || rec.cancel_requested || rec.orphaned) return false;
  std::erase(waiting_, rec.ticket.id);
  rec.where = Record::Where::kSuspended;
  ++rec.placement;  // a late callback of the run it had is ignored
  // No terminal event: the client's connection closes with the node, and a
  // resend or resume after the restart reaches the ticket again.
  book_.suspend(rec);
  return true;
}

void Dispatcher::set_handed_to(Record& rec, const std::string& peer) {
  rec.handed_to = peer;
  if (journal_)
    if (Status s = journal_->handed(rec.ticket.id, peer); !s.ok()) revis::log_line("warn", s.message());
}

void Dispatcher::restore_from_journal() {
  if (!journal_) return;
  const int64_t now_ms = unix_ms_now();
  auto entries = journal_->load(now_ms - int64_t(config_.result_ttl_s) * 1000);
  if (!entries.ok()) {
    revis::log_line("warn", entries.status().message());
    return;
  }
  int resumed = 0, kept = 0, with_peers = 0;
  std::vector<Record*> to_run;
  for (const JournalEntry& e : *entries) {
    auto parsed = node::parse_client_message(e.ticket, size_t(1) << 30);
    auto* message = std::get_if<node::ClientMessage>(&parsed);
    auto* ticket = message ? std::get_if<node::Ticket>(message) : nullptr;
    if (!ticket) {
      revis::log_line("warn", config_.journal + ": ticket " + e.id + " cannot be read back; dropped");
      (void)journal_->forget(e.id);
      continue;
    }
    auto rec = std::make_unique<Record>(std::move(*ticket));
    rec->id = e.id;
    rec->received = Clock::now();
    rec->attempt = e.attempt;
    if (!e.result.empty()) {
      rec->where = Record::Where::kDone;
      const auto finished = Clock::now() - std::chrono::milliseconds(std::max<int64_t>(0, now_ms - e.finished_unix_ms));
      book_.add_finished(std::move(rec), e.result, finished);
      ++kept;
      continue;
    } else if (!e.handed_to.empty() && peers_.count(e.handed_to)) {
      rec->where = Record::Where::kHandedOff;  // relayed once that peer's link is up
      rec->handed_to = e.handed_to;
      ++with_peers;
    } else {
      if (!e.handed_to.empty())
        revis::log_line("warn", config_.journal + ": ticket " + e.id + " was handed to " + e.handed_to +
                                   ", no longer a peer of this node; it runs here");
      to_run.push_back(rec.get());
    }
    book_.add(std::move(rec));
  }
  book_.sweep();  // beyond the caps, the oldest stay in the journal only
  // Put at the head of the queue (the limit does not apply to accepted
  // tickets), newest first, so that they run oldest first.
  for (auto it = to_run.rbegin(); it != to_run.rend(); ++it) {
    Record& rec = **it;
    retry(rec, "the accepting node restarted");
    ++resumed;
  }
  revis::log_line("info", "journal " + config_.journal + ": " + std::to_string(resumed) + " unfinished ticket(s) resumed, " +
                             std::to_string(with_peers) + " handed to peers, " + std::to_string(kept) + " result(s) kept");
}

// ---------------------------------------------------------------- peers

Dispatcher::Peer& Dispatcher::add_peer(const node::HostPort& at, const char* found) {
  const std::string key = at.host + ":" + std::to_string(at.port);
  std::unique_ptr<Peer>& slot = peers_[key];
  if (slot) return *slot;  // named twice: one peer
  slot = std::make_unique<Peer>();
  Peer& peer = *slot;
  peer.key = key;
  peer.found = found;
  peer.link_id = ++last_link_id_;
  PeerLinkEvents events;
  events.on_up = [this, key, id = peer.link_id](uint64_t s) { on_peer_up(key, id, s); };
  events.on_message = [this, key, id = peer.link_id](uint64_t s, std::string text) { on_peer_message(key, id, s, text); };
  events.on_down = [this, key, id = peer.link_id](uint64_t s, const std::string& why) { on_peer_down(key, id, s, why); };
  const std::string hello = json{{"type", "subscribe"}, {"node", config_.name}}.dump();
  peer.link = std::make_unique<PeerLink>(*io_, at, config_.token, hello, std::chrono::milliseconds(3 * config_.heartbeat_ms),
                                         std::move(events));
  return peer;
}

Dispatcher::Peer* Dispatcher::peer_of(const std::string& key, uint64_t link_id) {
  auto it = peers_.find(key);
  return it != peers_.end() && it->second->link_id == link_id ? it->second.get() : nullptr;
}

void Dispatcher::on_peer_up(const std::string& key, uint64_t link_id, uint64_t session) {
  MutexLock lock(book_.mu);
  Peer* peer = peer_of(key, link_id);
  if (!peer) return;
  Peer& p = *peer;
  p.up = true;
  p.session = session;
  p.known = false;
  p.in_flight = 0;
  p.last_heard = Clock::now();
}

void Dispatcher::on_peer_message(const std::string& key, uint64_t link_id, uint64_t session, const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string()) return;
  const std::string type = j["type"].get<std::string>();
  MutexLock lock(book_.mu);
  Peer* peer = peer_of(key, link_id);
  if (!peer) return;
  Peer& p = *peer;
  if (session != p.session) return;
  p.last_heard = Clock::now();
  if (type == "peer") {
    auto state = node_state_from_json(j.value("status", json()));
    if (!state.ok()) {
      p.last_error = state.status().message();
      return;
    }
    const bool was_busy = !p.known || p.state.busy;
    if (!p.known || p.state.instance != state->instance) {
      revis::log_line("info", "fabric: peer " + key + " is node " + state->name +
                                 (state->catalog == node_.catalog().digest() ? "" : " (another catalogue: it gets no tickets)"));
    }
    p.state = std::move(*state);
    p.known = true;
    p.is_self = p.state.instance == instance_;
    if (!p.is_self && p.state.catalog == node_.catalog().digest()) relay_handed(p);
    if (was_busy && !p.state.busy) p.idle_since = Clock::now();
    if (was_busy != p.state.busy) publish_cluster();
    if (!p.state.busy) offload();
    return;
  }
  if (!j.contains("ticketID") || !j["ticketID"].is_string()) {
    if (type == "error") p.last_error = j.value("message", "");
    return;
  }
  const std::string id = j["ticketID"].get<std::string>();
  Record* found = record(id);
  if (!found) return;
  Record& rec = *found;
  if (rec.where != Record::Where::kPeer || rec.peer != key || rec.session != session) return;
  handed_over_.notify_all();  // whatever it says, a handed ticket is settled with the peer
  if (type == "accepted") {
    rec.peer_has_it = true;
  } else if (type == "token") {
    const node::TicketEvent token = node::TicketEvent::read(text, j);  // renumbered here: a new event
    emit_token(rec, token.piece(), token.logprobs(), token.reasoning());
  } else if (type == "done") {
    --p.in_flight;
    finish(rec, node::TicketEvent::read(text, j));
  } else if (type == "error") {
    --p.in_flight;
    const auto code = node::error_code_from_name(j.value("code", "internal")).value_or(ErrorCode::kInternal);
    const std::string why = "node " + p.state.name + " answered " + j.value("code", "?") + ": " + j.value("message", "");
    if (code == ErrorCode::kQueueFull) {
      // Not a failed run: the peer was busy after all, as its next state
      // will say. Until then it is busy here too, and the ticket is back in
      // line. A handed ticket it refused is not there: it may run anywhere.
      p.state.busy = true;
      if (!rec.handed_to.empty()) set_handed_to(rec, "");
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
  MutexLock lock(book_.mu);
  Peer* peer = peer_of(key, link_id);
  if (!peer) return;
  Peer& p = *peer;
  if (p.up && p.session == session) {
    p.up = false;
    p.known = false;
    p.in_flight = 0;
    p.last_error = why;
    revis::log_line("warn", "fabric: link to " + key + " (" + p.state.name + ") down: " + why);
    publish_cluster();
  }
  std::vector<Record*> lost;
  for (Record* rec : all_records())
    if (rec->where == Record::Where::kPeer && rec->peer == key && rec->session == session) lost.push_back(rec);
  for (Record* rec : lost) {
    if (!rec->handed_to.empty()) {
      // Only that peer may run it: it waits for the link to come back.
      rec->where = Record::Where::kHandedOff;
      ++rec->placement;
      continue;
    }
    retry(*rec, "node " + (p.state.name.empty() ? key : p.state.name) + " was lost (" + why + ")");
  }
  handed_over_.notify_all();
  if (p.found == kFoundByMdns && p.service.empty() && !p.up) forget_peer(key);
}

// ---------------------------------------------------------------- discovery

void Dispatcher::start_discovery(int port) {
  Advertisement self;
  {
    MutexLock lock(book_.mu);
    const NodeState me = local_state();
    self = {me.name, me.instance, me.catalog, me.tiers, config_.host, port};
  }
  // Avahi's thread hands each event to the dispatcher's thread, so that it
  // never waits for book_.mu.
  DiscoveryEvents events;
  events.on_found = [this](const DiscoveredNode& found) { net::post(*io_, [this, found] { on_discovered(found); }); };
  events.on_lost = [this](const std::string& service) { net::post(*io_, [this, service] { on_discovery_lost(service); }); };
  auto started = Discovery::start(self, std::move(events));
  if (!started.ok()) return revis::log_line("warn", started.status().message());
  discovery_ = std::move(*started);
}

// A node found on the LAN becomes a peer like a --peer, unless it is this
// node or a peer already (by address, or by instance: the same node under a
// configured host name, or found before at another address).
void Dispatcher::on_discovered(const DiscoveredNode& found) {
  MutexLock lock(book_.mu);
  if (shutting_down_ || found.instance == instance_) return;
  const std::string key = found.address + ":" + std::to_string(found.port);
  for (auto& [k, p] : peers_)
    if (k == key || (p->known && p->state.instance == found.instance)) {
      p->service = found.service;
      return;
    }
  Peer& p = add_peer({found.address, found.port}, kFoundByMdns);
  p.service = found.service;
  p.link->start();
  revis::log_line("info", "fabric: found node " + found.name + " at " + key + " with mDNS" +
                             (found.catalog == node_.catalog().digest() ? "" : " (another catalogue: it gets no tickets)"));
}

// A withdrawn service says little about the node (mDNS records expire, a
// daemon restarts): a found peer whose link is up stays until the link
// fails; one whose link is down is forgotten now.
void Dispatcher::on_discovery_lost(const std::string& service) {
  MutexLock lock(book_.mu);
  std::vector<std::string> gone;
  for (auto& [key, p] : peers_) {
    if (p->service != service) continue;
    p->service.clear();
    if (p->found == kFoundByMdns && !p->up) gone.push_back(key);
  }
  for (const std::string& key : gone) forget_peer(key);
}

void Dispatcher::forget_peer(const std::string& key) {
  auto it = peers_.find(key);
  revis::log_line("info", "fabric: peer " + key + (it->second->state.name.empty() ? "" : " (" + it->second->state.name + ")") +
                             " forgotten: its mDNS service is gone and its link is down");
  peers_.erase(it);  // its link stops; its late events find no peer
}

// ---------------------------------------------------------------- state

NodeState Dispatcher::local_state() const {
  NodeState s;
  s.name = config_.name;
  s.instance = instance_;
  s.catalog = node_.catalog().digest();
  s.engine = node_.simulated() ? "sim" : "gguf";
  std::set<std::string> tiers{config_.default_tier};
  for (const auto& [name, task] : node_.catalog().tasks()) tiers.insert(task.tier);
  const std::vector<node::TierStatus> pool = node_.tiers().status();
  for (const std::string& t : tiers) {
    if (!node_.serves_tier(t)) continue;
    s.tiers.push_back(t);
    bool loaded = node_.simulated();
    if (const node::TierSpec* spec = node_.tiers().resolve(t))
      for (const node::TierStatus& ts : pool) {
        if (ts.name != spec->name) continue;
        loaded = loaded || ts.loaded;
        if (!ts.kv_prefixes.empty()) s.kv_prefixes[t] = ts.kv_prefixes;
      }
    if (loaded) s.loaded.push_back(t);
  }
  const node::ExecutorSnapshot snap = node_.executor().snapshot();
  s.busy = !snap.ready || snap.current.has_value() || snap.queue_length > 0;
  s.queue_length = snap.queue_length;
  if (snap.current && snap.ready) {
    const node::CurrentJob& c = *snap.current;
    s.current = c.label;
    s.job = NodeState::Job{c.task, c.phase, c.prompt_tokens, c.prompt_done, c.generated, c.max_tokens, c.elapsed_ms};
  }
  s.tok_per_s = tok_per_s_;
  s.executed = snap.executed;
  return s;
}

void Dispatcher::broadcast_state() {
  if (subscribers_.empty()) return;
  const node::TicketEvent event = node::TicketEvent::other(
      json{{"type", "peer"}, {"status", to_json(local_state())}}.dump(-1, ' ', false, json::error_handler_t::replace));
  for (const Link& s : subscribers_) s->send(event);
}

void Dispatcher::on_executor_change() {
  MutexLock lock(book_.mu);
  const node::ExecutorSnapshot snap = node_.executor().snapshot();
  const bool busy = snap.current.has_value() || snap.queue_length > 0;
  if (self_was_busy_ && !busy) self_idle_since_ = Clock::now();
  self_was_busy_ = busy;
  broadcast_state();
  const std::string running = snap.current ? snap.current->label : "";
  if (running != running_label_) {
    running_label_ = running;
    if (const Record* rec = record(running); rec && rec->where == Record::Where::kLocal) publish(*rec);
  }
  publish_cluster();
}

void Dispatcher::heartbeat_tick() {
  {
    MutexLock lock(book_.mu);
    broadcast_state();
    publish_cluster();
  }
  auto timer = std::make_shared<net::steady_timer>(*io_, std::chrono::milliseconds(config_.heartbeat_ms));
  timer->async_wait([this, timer](const boost::system::error_code& ec) {
    if (!ec) heartbeat_tick();
  });
}

void Dispatcher::on_shutdown() {
  discovery_.reset();  // first: a node shutting down is not one to find
  MutexLock lock(book_.mu);
  shutting_down_ = true;
  hand_off_unstarted();  // before the executor cancels the queued jobs
  waiting_.clear();
  std::vector<Record*> elsewhere;  // collected first: finishing an OpenAI request forgets it
  // A handed ticket is the peer's now: it is neither cancelled nor ended here.
  for (Record* rec : all_records())
    if ((rec->where == Record::Where::kPeer && rec->handed_to.empty()) || rec->where == Record::Where::kWaiting)
      elsewhere.push_back(rec);
  for (Record* rec : elsewhere) {
    if (rec->where == Record::Where::kPeer) cancel_ticket(*rec);
    if (!suspend(*rec)) finish(*rec, node::error_event(rec->ticket.id, {ErrorCode::kCancelled, "the node is shutting down"}));
  }
}

void Dispatcher::on_stopped() {
  MutexLock lock(book_.mu);
  shutting_down_ = true;
  // Tickets handed to peers: until each peer has said it holds them (or its
  // link dropped), so that they run there while this node is down.
  const auto deadline = Clock::now() + kHandOffWait;
  auto unsettled = [](const Record* r) {
    return r->where == Record::Where::kPeer && !r->handed_to.empty() && !r->peer_has_it;
  };
  while (std::ranges::any_of(all_records(), unsettled))
    if (!handed_over_.wait_until(book_.mu, deadline)) break;
  subscribers_.clear();
  feed_.clear();
  pinned_.clear();
  book_.detach_all();
}

std::string Dispatcher::cluster_json() {
  MutexLock lock(book_.mu);
  return cluster_view().dump(-1, ' ', false, json::error_handler_t::replace);
}

json Dispatcher::cluster_view() const {
  json nodes = json::array();
  const NodeState me = local_state();
  json self = to_json(me);
  self["address"] = "self";
  self["self"] = true;
  self["link"] = "self";
  self["catalogMatches"] = true;
  self["lastHeartbeatMsAgo"] = 0;
  nodes.push_back(self);
  int queued = me.queue_length + static_cast<int>(waiting_.size()), running = me.current.empty() ? 0 : 1;
  for (const auto& [key, p] : peers_) {
    if (p->is_self) continue;
    json n = p->known ? to_json(p->state) : json{{"name", nullptr}};
    n["address"] = key;
    n["self"] = false;
    n["link"] = p->up ? "up" : "down";
    n["found"] = p->found;
    n["catalogMatches"] = p->known && p->state.catalog == me.catalog;
    n["lastHeartbeatMsAgo"] = p->last_heard == Clock::time_point{} ? json(nullptr) : json(ms_since(p->last_heard));
    n["forwardedInFlight"] = p->in_flight;
    if (!p->last_error.empty()) n["lastError"] = p->last_error;
    nodes.push_back(n);
    if (p->known && p->up) {
      queued += p->state.queue_length;
      running += p->state.current.empty() ? 0 : 1;
    }
  }
  int here_local = 0, here_forwarded = 0, finished = 0;
  for (const Record* rec : all_records()) {
    if (rec->where == Record::Where::kLocal) ++here_local;
    else if (rec->where == Record::Where::kPeer || rec->where == Record::Where::kWaiting ||
             rec->where == Record::Where::kHandedOff)
      ++here_forwarded;
    else ++finished;
  }
  return json{{"node", config_.name},
              {"nodes", nodes},
              {"tickets",
               {{"queued", queued},
                {"running", running},
                {"acceptedHere", {{"local", here_local}, {"forwarded", here_forwarded}, {"finishedKept", finished}}},
                {"keptResults",
                 {{"count", book_.kept_results()},
                  {"bytes", book_.kept_result_bytes()},
                  {"maxCount", config_.max_kept_results},
                  {"maxBytes", config_.max_kept_results_mb << 20}}}}}};
}

void Dispatcher::publish_cluster() {
  if (!feed_.empty()) feed_.send(ClusterFeed::cluster_event(cluster_view()));
}

TicketView Dispatcher::view_of(const Record& rec) const {
  TicketView v;
  v.id = rec.ticket.id;
  v.task = rec.ticket.task;
  v.attempt = rec.attempt;
  v.received_unix_ms = rec.received_unix_ms;
  v.openai = !rec.kept;
  switch (rec.where) {
    case Record::Where::kWaiting:
    case Record::Where::kSuspended:  // runs at the next start
      v.state = "queued";
      break;
    case Record::Where::kLocal:
      v.state = running_label_ == rec.ticket.id ? "running" : "queued";
      v.node = config_.name;
      break;
    case Record::Where::kPeer: {
      v.state = "running";
      auto it = peers_.find(rec.peer);
      v.node = it == peers_.end() || it->second->state.name.empty() ? rec.peer : it->second->state.name;
      break;
    }
    case Record::Where::kHandedOff:  // the peer holds it; its link relays it once up
      v.state = "queued";
      v.node = rec.handed_to;
      break;
    case Record::Where::kDone:
      v.terminal = rec.terminal;  // done or failed: ticket_event reads which
      break;
  }
  return v;
}

void Dispatcher::publish(const Record& rec) {
  if (!feed_.empty()) feed_.send(ClusterFeed::ticket_event(view_of(rec)));
}

}  // namespace revis::fabric
