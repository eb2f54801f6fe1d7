#include "node/ticket_book.h"

#include <algorithm>

namespace revis::node {

TicketEntry* TicketBook::find(const std::string& id) {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.get();
}

TicketEntry& TicketBook::add(std::unique_ptr<TicketEntry> entry) {
  TicketEntry& e = *entry;
  entries_[e.id] = std::move(entry);
  return e;
}

void TicketBook::add_finished(std::unique_ptr<TicketEntry> entry, std::string terminal, Clock::time_point at) {
  TicketEntry& e = add(std::move(entry));
  e.terminal = TicketEvent::read(std::move(terminal));
  e.finished_at = at;
  keep(e);
  // Read back in any order: the expiry order stays oldest first.
  const std::pair<Clock::time_point, std::string> item{at, e.id};
  finished_order_.insert(std::upper_bound(finished_order_.begin(), finished_order_.end(), item), item);
}

void TicketBook::erase(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (it->second->finished() && it->second->kept) {
    --kept_results_;
    kept_result_bytes_ -= it->second->kept_bytes;
  }
  entries_.erase(it);  // its place in finished_order_ no longer matches: skipped there
}

bool TicketBook::attach(TicketEntry& entry, const Link& link, int attempt, int64_t after_seq) {
  size_t from = 0;
  if (attempt == entry.attempt) {
    from = static_cast<size_t>(after_seq + 1);
  } else if (attempt != 0 || entry.attempt > 1) {
    link->send(retry_event(entry.id, entry.attempt, "the ticket ran again; its text restarts"));
  }
  for (size_t i = from; i < entry.events.size(); ++i) link->send(entry.events[i]);
  if (entry.finished()) {
    link->send(entry.terminal);
    return false;
  }
  if (!follows(entry, link)) entry.clients.push_back(link);
  return true;
}

bool TicketBook::follows(const TicketEntry& entry, const Link& link) const {
  return std::find(entry.clients.begin(), entry.clients.end(), link) != entry.clients.end();
}

void TicketBook::detach(TicketEntry& entry, const Link& link) { std::erase(entry.clients, link); }

std::vector<TicketEntry*> TicketBook::detach_everywhere(const Link& link) {
  std::vector<TicketEntry*> orphans;
  for (auto& [id, entry] : entries_) {
    if (entry->finished()) continue;
    const size_t before = entry->clients.size();
    std::erase(entry->clients, link);
    if (before > 0 && entry->clients.empty()) orphans.push_back(entry.get());
  }
  return orphans;
}

void TicketBook::detach_all() {
  for (auto& [id, entry] : entries_) entry->clients.clear();
}

void TicketBook::emit(TicketEntry& entry, TicketEvent event) {
  pass(entry, event);
  entry.events.push_back(std::move(event));
}

void TicketBook::pass(TicketEntry& entry, const TicketEvent& event) {
  for (const Link& c : entry.clients) c->send(event);
}

void TicketBook::restart(TicketEntry& entry, const std::string& reason, int attempt) {
  entry.attempt = attempt > 0 ? attempt : entry.attempt + 1;
  entry.events.clear();
  for (const Link& c : entry.clients) c->send(retry_event(entry.id, entry.attempt, reason));
}

void TicketBook::suspend(TicketEntry& entry) {
  entry.events.clear();
  entry.clients.clear();
}

void TicketBook::finish(TicketEntry& entry, TicketEvent terminal, const BeforeSend& before_send) {
  entry.terminal = std::move(terminal);
  entry.finished_at = Clock::now();
  if (before_send) before_send(entry);
  for (const Link& c : entry.clients) c->send(entry.terminal);
  if (!entry.kept) {
    const std::string id = entry.id;  // not a reference into what erase destroys
    entries_.erase(id);
    return;
  }
  entry.clients.clear();
  keep(entry);
  finished_order_.emplace_back(entry.finished_at, entry.id);
  sweep();
}

void TicketBook::keep(TicketEntry& entry) {
  if (!limits_.keep_finished_tokens) std::vector<TicketEvent>().swap(entry.events);
  size_t bytes = sizeof(TicketEntry) + entry.ticket_bytes() + entry.id.size() + entry.terminal.text().size();
  for (const TicketEvent& e : entry.events) bytes += e.text().size();
  entry.kept_bytes = bytes;
  ++kept_results_;
  kept_result_bytes_ += bytes;
}

void TicketBook::sweep() {
  while (!finished_order_.empty()) {
    const auto& [at, id] = finished_order_.front();
    const bool expired = Clock::now() - at > limits_.result_ttl;
    const bool over = finished_order_.size() > 1 && (kept_results_ > limits_.max_results || kept_result_bytes_ > limits_.max_bytes);
    if (!expired && !over) break;
    if (auto it = entries_.find(id); it != entries_.end() && it->second->finished() && it->second->finished_at == at)
      erase(id);
    finished_order_.pop_front();
  }
}

}  // namespace revis::node
