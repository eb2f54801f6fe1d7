#include "broker/desk.h"

#include <atomic>

#include <nlohmann/json.hpp>

#include "broker/streams.h"
#include "node/log.h"

namespace revis::broker {

using node::ErrorCode;

struct Desk::Follow {
  std::shared_ptr<node::ClientLink> client;
  std::unique_ptr<Subscription> sub;
  std::atomic<bool> done{false};
  // Sends a final event once, however it arrived (live, or read back).
  bool finish(const std::string& event) {
    if (done.exchange(true)) return false;
    client->send(event);
    return true;
  }
};

Desk::Desk(node::Node& node, Connection& conn, Worker& worker) : node_(node), conn_(conn), worker_(worker) {}

Desk::~Desk() { on_stopped(); }

std::shared_ptr<Desk::Follow> Desk::follow(const std::shared_ptr<node::ClientLink>& from, const std::string& id) {
  auto f = std::make_shared<Follow>();
  f->client = from;
  node::ClientLink* link = from.get();
  const std::string results = result_subject(id);
  std::weak_ptr<Follow> weak = f;
  // One subscription for events and result, so they arrive in the order
  // the running node published them.
  auto sub = conn_.subscribe("revis.*." + id, [this, weak, link, id, results](const Message& m) {
    auto raw = weak.lock();
    if (!raw) return;  // the client is gone
    if (m.subject == results) {
      if (raw->finish(m.data)) drop(link, id);
    } else if (m.subject == event_subject(id) && !raw->done) {
      raw->client->send(m.data);
    }
  });
  if (!sub.ok() || !conn_.flush().ok()) return nullptr;
  f->sub = std::move(*sub);
  std::vector<std::shared_ptr<Follow>> finished;
  {
    MutexLock lock(mu_);
    follows_[link][id] = f;
    finished.swap(finished_);
  }
  // The result may be there already: a duplicate ticketID, or a resume.
  if (auto existing = conn_.last_message(kResultStream, results); existing.ok() && *existing)
    if (f->finish(**existing)) drop(link, id);
  return f;
}

void Desk::drop(node::ClientLink* link, const std::string& id) {
  MutexLock lock(mu_);
  auto it = follows_.find(link);
  if (it == follows_.end()) return;
  if (auto f = it->second.find(id); f != it->second.end()) {
    // Not destroyed here: this may run on the subscription's own thread.
    finished_.push_back(std::move(f->second));
    it->second.erase(f);
  }
  if (it->second.empty()) follows_.erase(it);
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
  if (!conn_.connected()) return run_here(from, std::move(ticket), received);
  auto f = follow(from, ticket.id);
  if (!f) return run_here(from, std::move(ticket), received);
  if (f->done) return;  // its result existed: sent
  from->send(node::accepted_event(ticket.id, 0));
  if (Status s = conn_.publish(ticket_subject(ticket.task), node::ticket_message(ticket), ticket.id); !s.ok()) {
    node::log_line("warn", s.message() + "; ticket " + ticket.id + " runs on this node");
    drop(from.get(), ticket.id);
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

bool Desk::following(node::ClientLink* link, const std::string& id) {
  MutexLock lock(mu_);
  auto it = follows_.find(link);
  return it != follows_.end() && it->second.count(id);
}

void Desk::on_cancel(const std::shared_ptr<node::ClientLink>& from, const std::string& id) {
  if (const uint64_t job = local_.job(from.get(), id)) {
    node_.executor().cancel(job, "cancelled by the client");
    return;
  }
  // Cancelling what is not in flight (or not this client's) is ignored: the
  // client may have lost the race with `done`.
  if (!following(from.get(), id)) return;
  auto existing = conn_.last_message(kResultStream, result_subject(id));
  if (existing.ok() && *existing) return;  // finished: its result is on its way
  const node::NodeError cancelled{ErrorCode::kCancelled, "cancelled by the client"};
  conn_.publish_core(cancel_subject(id), "");
  // The stored result ends the relay of every client following it.
  if (Status s = conn_.publish(result_subject(id), node::error_event(id, cancelled), id); !s.ok()) {
    node::log_line("warn", s.message() + "; ticket " + id + " no longer relayed to the client that cancelled it");
    drop(from.get(), id);
    from->send(node::error_event(id, cancelled));
  }
}

void Desk::on_resume(const std::shared_ptr<node::ClientLink>& from, const node::ResumeRequest& request) {
  if (!conn_.connected())
    return from->refuse(request.id, {ErrorCode::kUnknownTicket, "the broker is unreachable: ticket " + request.id + " cannot be followed now"});
  if (!follow(from, request.id))
    from->refuse(request.id, {ErrorCode::kInternal, "the broker is unreachable: ticket " + request.id + " cannot be followed now"});
}

void Desk::on_subscribe(const std::shared_ptr<node::ClientLink>& from, const node::SubscribeRequest&) {
  from->refuse(std::nullopt, {ErrorCode::kBadRequest, "this node shares tickets through a broker, not with peers"});
}

void Desk::on_disconnect(const std::shared_ptr<node::ClientLink>& from) {
  local_.take(from.get());  // its runs here go on, unseen
  std::map<std::string, std::shared_ptr<Follow>> gone;  // released after the lock
  std::vector<std::shared_ptr<Follow>> finished;
  MutexLock lock(mu_);
  if (auto it = follows_.find(from.get()); it != follows_.end()) {
    gone = std::move(it->second);
    follows_.erase(it);
  }
  finished.swap(finished_);
}

std::string Desk::cluster_json() {
  nlohmann::json doc{{"node", node_.config().name}, {"broker", nlohmann::json::parse(worker_.status_json())}};
  return doc.dump();
}

void Desk::on_shutdown() { worker_.request_stop(); }

void Desk::on_stopped() {
  std::map<node::ClientLink*, std::map<std::string, std::shared_ptr<Follow>>> gone;  // released after the lock
  std::vector<std::shared_ptr<Follow>> finished;
  MutexLock lock(mu_);
  gone.swap(follows_);
  finished.swap(finished_);
}

}  // namespace revis::broker
