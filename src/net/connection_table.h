// The node's open connections counted against its caps: in all
// (max_connections, further bounded by the descriptor limit) and per source
// address (max_connections_per_ip). Connections waiting for a request are
// also kept in the order they became idle: a new connection that would
// pass a cap takes the place of the longest idle one (of its own address
// first, when that address is at its cap) instead of being refused, so a
// flood of idle connections cannot lock out /health or a real client.
// Busy connections (a request being read or answered, a WebSocket) are
// never evicted; when only they fill a cap the new connection is refused.
//
// Thread-safety: the server's I/O thread only.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace revis::node {

class ConnectionTable {
 public:
  // A connection the table may close to make room.
  class Idle {
   public:
    virtual ~Idle() = default;
    // Closes the connection now and releases its slot.
    virtual void evict() = 0;
  };

 private:
  struct Entry {
    std::weak_ptr<Idle> connection;
    std::string address;
  };

 public:
  // One connection's place in the table; released on destruction.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept { *this = std::move(other); }
    Slot& operator=(Slot&& other) noexcept;
    ~Slot() { release(); }
    void release();
    const std::string& address() const { return address_; }

   private:
    friend class ConnectionTable;
    ConnectionTable* table_ = nullptr;
    std::string address_;
    bool idle_ = false;
    std::list<Entry>::iterator entry_;
  };

  ConnectionTable(size_t max_total, size_t max_per_address) : max_total_(max_total), max_per_address_(max_per_address) {}
  ConnectionTable(const ConnectionTable&) = delete;
  ConnectionTable& operator=(const ConnectionTable&) = delete;

  // A slot for a new connection from `address`, after evicting idle
  // connections where a cap is reached; none when busy ones fill it.
  std::optional<Slot> admit(const std::string& address);
  // The slot's connection waits for a request (and may be evicted), or no
  // longer does. Both are no-ops on a released slot.
  void set_idle(Slot& slot, std::weak_ptr<Idle> connection);
  void set_busy(Slot& slot);
  // Evicts the longest idle connection, if any: a descriptor for accept().
  bool evict_one();

  size_t size() const { return total_; }
  size_t max_total() const { return max_total_; }
  size_t max_per_address() const { return max_per_address_; }

 private:
  bool evict_first(const std::string* address);
  void leave(Slot& slot);

  const size_t max_total_, max_per_address_;
  size_t total_ = 0;
  std::map<std::string, size_t> per_address_;
  std::list<Entry> idle_;  // longest idle first
};

}  // namespace revis::node
