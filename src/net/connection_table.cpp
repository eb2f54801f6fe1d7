#include "net/connection_table.h"

namespace revis::node {

ConnectionTable::Slot& ConnectionTable::Slot::operator=(Slot&& other) noexcept {
  if (this == &other) return *this;
  release();
  table_ = other.table_;
  address_ = std::move(other.address_);
  idle_ = other.idle_;
  entry_ = other.entry_;
  other.table_ = nullptr;
  other.idle_ = false;
  return *this;
}

void ConnectionTable::Slot::release() {
  if (!table_) return;
  ConnectionTable* table = table_;
  table_ = nullptr;
  table->leave(*this);
}

std::optional<ConnectionTable::Slot> ConnectionTable::admit(const std::string& address) {
  auto it = per_address_.find(address);
  if (it != per_address_.end() && it->second >= max_per_address_ && !evict_first(&address)) return std::nullopt;
  if (total_ >= max_total_ && !evict_first(nullptr)) return std::nullopt;
  ++total_;
  ++per_address_[address];
  Slot slot;
  slot.table_ = this;
  slot.address_ = address;
  return slot;
}

void ConnectionTable::set_idle(Slot& slot, std::weak_ptr<Idle> connection) {
  if (slot.table_ != this) return;
  set_busy(slot);
  idle_.push_back({std::move(connection), slot.address_});
  slot.entry_ = std::prev(idle_.end());
  slot.idle_ = true;
}

void ConnectionTable::set_busy(Slot& slot) {
  if (!slot.idle_) return;
  idle_.erase(slot.entry_);
  slot.idle_ = false;
}

bool ConnectionTable::evict_one() { return evict_first(nullptr); }

bool ConnectionTable::evict_first(const std::string* address) {
  for (const Entry& entry : idle_) {
    if (address && entry.address != *address) continue;
    // evict() releases the slot, which erases the entry: nothing of the
    // list is touched after it.
    if (std::shared_ptr<Idle> connection = entry.connection.lock()) {
      connection->evict();
      return true;
    }
  }
  return false;
}

void ConnectionTable::leave(Slot& slot) {
  set_busy(slot);
  --total_;
  auto it = per_address_.find(slot.address_);
  if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
}

}  // namespace revis::node
