// A node's end of a durable pull consumer (broker/streams.h): it fetches one
// ticket at a time, and a Delivery is that ticket until it is settled, by
// ack (done: its result is published), term (it can never run), nak (give
// it back now) or nothing at all (JetStream redelivers it after the ack
// wait). in_progress() restarts the ack wait while the ticket runs.
//
// Thread-safety: a PullConsumer is used by one thread at a time; a Delivery
// may be settled from any thread, once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "broker/connection.h"

struct __natsMsg;

namespace revis::broker {

class Delivery {
 public:
  explicit Delivery(__natsMsg* msg, Connection& conn) : msg_(msg), conn_(conn) {}
  ~Delivery();
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;

  std::string data() const;
  std::string subject() const;
  // 1 for the first delivery, 2 for the first redelivery, ...
  uint64_t delivery_count() const;

  // Waits for the server to confirm the ack: once it returns ok, the
  // ticket is gone from the work queue.
  Status ack();
  Status in_progress();
  Status term();
  Status nak();

 private:
  __natsMsg* msg_;
  Connection& conn_;
};

class PullConsumer {
 public:
  // Binds to the existing durable consumer of `task` (ensure_consumer).
  static Result<std::unique_ptr<PullConsumer>> bind(Connection& conn, const std::string& task);
  ~PullConsumer();
  PullConsumer(const PullConsumer&) = delete;
  PullConsumer& operator=(const PullConsumer&) = delete;

  const std::string& task() const { return task_; }
  // One ticket, waiting up to `wait_ms` for one to arrive (0: only one that
  // is there now); nullopt when none came.
  Result<std::unique_ptr<Delivery>> fetch_one(int wait_ms);

 private:
  PullConsumer(Connection& conn, std::string task, struct __natsSubscription* sub)
      : conn_(conn), task_(std::move(task)), sub_(sub) {}
  Connection& conn_;
  std::string task_;
  struct __natsSubscription* sub_;
  int64_t rtt_ns_ = 0;  // how long a NoWait fetch waits for its answer (measured once)
};

}  // namespace revis::broker
