#include "broker/desk.h"

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "broker/streams.h"

namespace revis::broker {

using node::ErrorCode;

// A ticket in the book, relayed from the broker while `sub` lasts.
struct Desk::Relay : node::TicketEntry {
  uint64_t serial = 0;  // tells this relay's events from those of an earlier one of the same ticketID
  std::unique_ptr<Subscription> sub;
};

namespace {

// The `type` of an event from the broker; "" when it has none.
std::string event_type(const nlohmann::json& event) {
  const auto type = event.find("type");
  return type != event.end() && type->is_string() ? type->get<std::string>() : "";
}

// A token event's seq; -1 for any other event.
int64_t token_seq(const nlohmann::json& event) {
  const auto seq = event.find("seq");
  if (event_type(event) != "token" || seq == event.end() || !seq->is_number_unsigned()) return -1;
  return seq->get<int64_t>();
}

}  // namespace

// REVIS_RESULTS holds each result: a resume of a finished ticket gets its
// final event, not its token events.
Desk::Desk(node::Node& node, Connection& conn, Worker& worker)
    : node_(node),
      conn_(conn),
      worker_(worker),
      book_({std::chrono::seconds(node.config().result_ttl_s), size_t(node.config().max_kept_results),
             size_t(node.config().max_kept_results_mb) << 20, false}) {}

Desk::~Desk() { on_stopped(); }

Desk::Relay* Desk::relay_of(const std::string& id) { return static_cast<Relay*>(book_.find(id)); }

Desk::Followed Desk::follow(const std::shared_ptr<node::ClientLink>& from, const std::string& id, bool kept) {
  uint64_t serial = 0;
  {
    MutexLock lock(book_.mu);
    auto relay = std::make_unique<Relay>();
    relay->id = id;
    relay->kept = kept;
    relay->serial = serial = ++last_relay_;
    book_.attach(book_.add(std::move(relay)), from, 0, -1);
  }
  // One subscription for events and result, so they arrive in the order
  // the running node published them.
  auto sub = conn_.subscribe("revis.*." + id, [this, id, serial](const Message& m) { on_relayed(id, serial, m); });
  const bool subscribed = sub.ok() && conn_.flush().ok();
  std::vector<std::unique_ptr<Subscription>> unused;  // released after the lock
  {
    MutexLock lock(book_.mu);
    Relay* relay = relay_of(id);
    const bool ours = relay && relay->serial == serial;
    if (sub.ok()) unused.push_back(std::move(*sub));
    if (!subscribed) {
      if (ours && !relay->finished()) book_.erase(id);
      return Followed::kUnreachable;
    }
    if (!ours || relay->finished()) return Followed::kFinished;  // its result came already
    relay->sub = std::move(unused.back());
  }
  // The result may be there already: a duplicate ticketID, or a resume.
  auto existing = conn_.last_message(kResultStream, result_subject(id));
  if (!existing.ok() || !*existing) return Followed::kFollowing;
  node::TicketEvent result = node::TicketEvent::read(std::move(**existing));  // before the lock
  MutexLock lock(book_.mu);
  if (Relay* relay = relay_of(id); relay && relay->serial == serial && !relay->finished()) finish(*relay, std::move(result));
  return Followed::kFinished;
}

void Desk::on_relayed(const std::string& id, uint64_t serial, const Message& m) {
  const bool result = m.subject == result_subject(id);
  if (!result && m.subject != event_subject(id)) return;
  // Read once, before the lock: the book and the clients take it as it is.
  const nlohmann::json event = nlohmann::json::parse(m.data, nullptr, false);
  node::TicketEvent relayed = node::TicketEvent::read(m.data, event);
  MutexLock lock(book_.mu);
  Relay* relay = relay_of(id);
  if (!relay || relay->serial != serial || relay->finished()) return;
  if (result) return finish(*relay, std::move(relayed));
  // The running node's token events keep their seq; a redelivered ticket
  // starts again with a `retry` event.
  if (relayed.type() == node::TicketEvent::Type::kRetry) return book_.restart(*relay, relayed.reason(), relayed.attempt());
  if (token_seq(event) == static_cast<int64_t>(book_.next_seq(*relay))) return book_.emit(*relay, std::move(relayed));
  book_.pass(*relay, relayed);
}

void Desk::finish(Relay& relay, node::TicketEvent terminal) {
  if (relay.sub) ended_.push_back(std::move(relay.sub));
  book_.finish(relay, std::move(terminal));
}

void Desk::forget(Relay& relay) {
  if (relay.sub) ended_.push_back(std::move(relay.sub));
  const std::string id = relay.id;
  book_.erase(id);
}

std::vector<std::unique_ptr<Subscription>> Desk::take_ended() {
  std::vector<std::unique_ptr<Subscription>> ended;
  ended.swap(ended_);
  return ended;
}

void Desk::on_ticket(const std::shared_ptr<node::ClientLink>& from, node::Ticket ticket, node::Clock::time_point received) {
  if (ticket.forwarded_by && !ticket.openai)
    return from->refuse(ticket.id, {ErrorCode::kBadRequest, "this node takes tickets through its broker, not from peers"});
  // What any node would refuse is refused here; a tier this node lacks may
  // be served by another.
  auto spec = node_.admit(ticket, received);
  if (!spec.ok() && spec.error().code != ErrorCode::kModelUnavailable) return from->refuse(ticket.id, spec.error());
  if (!valid_task_name(ticket.task))
    return from->refuse(ticket.id, {ErrorCode::kBadRequest, "taskType \"" + ticket.task + "\" cannot travel through the broker"});
  if (ticket.openai) ticket.forwarded_by = node_.config().name;  // the pulling node takes the call's own settings
  {
    std::vector<std::unique_ptr<Subscription>> ended;  // released after the lock
    MutexLock lock(book_.mu);
    ended = take_ended();
    book_.sweep();
    if (Relay* relay = relay_of(ticket.id)) {
      if (book_.follows(*relay, from) && !relay->finished())
        return from->refuse(ticket.id, {ErrorCode::kBadRequest, "ticket " + ticket.id + " is already in flight on this connection"});
      // The same ticketID again (another client, or one retrying after a
      // lost connection): the one relay, not a second run.
      from->send(node::accepted_event(ticket.id, 0));
      book_.attach(*relay, from, 0, -1);
      return;
    }
  }
  if (!conn_.connected()) return run_here(from, std::move(ticket), received);
  switch (follow(from, ticket.id, !ticket.openai)) {
    case Followed::kUnreachable: return run_here(from, std::move(ticket), received);
    case Followed::kFinished: return;  // its result existed: sent
    case Followed::kFollowing: break;
  }
  from->send(node::accepted_event(ticket.id, 0));
  if (Status s = conn_.publish(ticket_subject(ticket.task), node::ticket_message(ticket), ticket.id); !s.ok()) {
    revis::log_line("warn", s.message() + "; ticket " + ticket.id + " runs on this node");
    std::vector<std::unique_ptr<Subscription>> ended;  // released after the lock
    {
      MutexLock lock(book_.mu);
      Relay* relay = relay_of(ticket.id);
      if (relay && relay->finished()) return;  // a result came after all
      if (relay) forget(*relay);
      ended = take_ended();
    }
    return run_here(from, std::move(ticket), received);
  }
}

void Desk::run_here(const std::shared_ptr<node::ClientLink>& from, node::Ticket ticket, node::Clock::time_point received) {
  auto spec = node_.admit(ticket, received);
  if (!spec.ok()) return from->refuse(ticket.id, spec.error());
  auto admission = local_.run(node_.executor(), from, ticket.id, std::move(*spec), ticket.streaming);
  if (!admission.ok()) return from->refuse(ticket.id, admission.error());
  from->send(node::accepted_event(ticket.id, admission->position));
}

void Desk::on_cancel(const std::shared_ptr<node::ClientLink>& from, const std::string& id) {
  if (const uint64_t job = local_.job(from.get(), id)) {
    node_.executor().cancel(job, "cancelled by the client");
    return;
  }
  {
    MutexLock lock(book_.mu);
    // Cancelling what is not in flight (or not this client's) is ignored:
    // the client may have lost the race with `done`.
    const Relay* relay = relay_of(id);
    if (!relay || relay->finished() || !book_.follows(*relay, from)) return;
  }
  auto existing = conn_.last_message(kResultStream, result_subject(id));
  if (existing.ok() && *existing) return;  // finished: its result is on its way
  const node::NodeError cancelled{ErrorCode::kCancelled, "cancelled by the client"};
  conn_.publish_core(cancel_subject(id), "");
  // The stored result ends the relay to every client following it.
  if (Status s = conn_.publish(result_subject(id), node::error_event(id, cancelled).text(), id); !s.ok()) {
    revis::log_line("warn", s.message() + "; ticket " + id + " no longer relayed to the client that cancelled it");
    {
      MutexLock lock(book_.mu);
      if (Relay* relay = relay_of(id); relay && !relay->finished()) {
        book_.detach(*relay, from);
        if (relay->clients.empty()) forget(*relay);
      }
    }
    from->send(node::error_event(id, cancelled));
  }
}

void Desk::on_resume(const std::shared_ptr<node::ClientLink>& from, const node::ResumeRequest& request) {
  {
    std::vector<std::unique_ptr<Subscription>> ended;  // released after the lock
    MutexLock lock(book_.mu);
    ended = take_ended();
    book_.sweep();
    if (Relay* relay = relay_of(request.id)) {
      book_.attach(*relay, from, request.attempt, request.after_seq);
      return;
    }
  }
  if (!conn_.connected())
    return from->refuse(request.id, {ErrorCode::kUnknownTicket, "the broker is unreachable: ticket " + request.id + " cannot be followed now"});
  if (follow(from, request.id, true) == Followed::kUnreachable)
    from->refuse(request.id, {ErrorCode::kInternal, "the broker is unreachable: ticket " + request.id + " cannot be followed now"});
}

void Desk::on_subscribe(const std::shared_ptr<node::ClientLink>& from, const node::SubscribeRequest&) {
  from->refuse(std::nullopt, {ErrorCode::kBadRequest, "this node shares tickets through a broker, not with peers"});
}

void Desk::on_disconnect(const std::shared_ptr<node::ClientLink>& from) {
  local_.take(from.get());  // its runs here go on, unseen
  std::vector<std::unique_ptr<Subscription>> ended;  // released after the lock
  MutexLock lock(book_.mu);
  // A relay nobody follows ends; the ticket runs on, and a resume follows
  // it again.
  for (node::TicketEntry* orphan : book_.detach_everywhere(from)) forget(static_cast<Relay&>(*orphan));
  ended = take_ended();
}

std::string Desk::cluster_json() {
  nlohmann::json doc{{"node", node_.config().name}, {"broker", nlohmann::json::parse(worker_.status_json())}};
  return doc.dump();
}

void Desk::on_shutdown() { worker_.request_stop(); }

void Desk::on_stopped() {
  std::vector<std::unique_ptr<Subscription>> ended;  // released after the lock
  MutexLock lock(book_.mu);
  std::vector<Relay*> relaying;
  for (const auto& [id, entry] : book_.entries())
    if (!entry->finished()) relaying.push_back(static_cast<Relay*>(entry.get()));
  for (Relay* relay : relaying) forget(*relay);
  book_.detach_all();
  ended = take_ended();
}

}  // namespace revis::broker
