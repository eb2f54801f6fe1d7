#include "broker/client.h"

#include <nlohmann/json.hpp>

#include "broker/streams.h"

namespace revis::broker {

Result<std::unique_ptr<TicketClient>> TicketClient::connect(const BrokerOptions& options) {
  auto conn = Connection::connect(options);
  if (!conn.ok()) return conn.status();
  if (Status s = ensure_streams_exist(**conn, {}); !s.ok()) return s;
  return std::unique_ptr<TicketClient>(new TicketClient(std::move(*conn)));
}

TicketClient::~TicketClient() { close(); }

void TicketClient::close() { follows_.clear(); }

void TicketClient::push(const std::string& id, std::string message, bool final) {
  {
    MutexLock lock(mu_);
    // A result published while send() also read it back arrives twice.
    if (final && !finished_.insert(id).second) return;
    inbox_.push_back(std::move(message));
  }
  arrived_.notify_one();
}

Status TicketClient::send(std::string_view text) {
  const nlohmann::json ticket = nlohmann::json::parse(text, nullptr, false);
  if (!ticket.is_object() || !ticket.contains("ticketID") || !ticket["ticketID"].is_string() ||
      !ticket.contains("taskType") || !ticket["taskType"].is_string())
    return Status::error("broker: a ticket needs string ticketID and taskType");
  const std::string id = ticket["ticketID"], task = ticket["taskType"];
  if (!valid_task_name(task)) return Status::error("broker: taskType \"" + task + "\" cannot be a NATS subject token");
  if (id.find_first_of(".*> \t") != std::string::npos || id.empty())
    return Status::error("broker: ticketID \"" + id + "\" cannot be a NATS subject token");
  if (!follows_.count(id)) {
    auto sub = conn_->subscribe("revis.*." + id, [this, id](const Message& m) {
      if (m.subject == result_subject(id) || m.subject == event_subject(id)) push(id, m.data, m.subject == result_subject(id));
    });
    if (!sub.ok()) return sub.status();
    if (Status s = conn_->flush(); !s.ok()) return s;
    follows_[id] = std::move(*sub);
  }
  auto stored = conn_->last_message(kResultStream, result_subject(id));
  if (!stored.ok()) return stored.status();
  if (*stored) {
    push(id, **stored, true);
    return Status();
  }
  return conn_->publish(ticket_subject(task), text, id);
}

Result<std::string> TicketClient::receive(int timeout_ms) {
  MutexLock lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (inbox_.empty())
    if (!arrived_.wait_until(mu_, deadline) && inbox_.empty()) return Status::error("timeout");
  std::string message = std::move(inbox_.front());
  inbox_.pop_front();
  return message;
}

}  // namespace revis::broker
