// The node's pulling side of the broker (docs/scale-out.md): one durable
// pull consumer per task type the node serves (its catalogue's tasks on the
// tiers it has, and the two OpenAI endpoints), shared by every node serving
// that type.
//
// One forward pass per machine stays the rule: the worker fetches a ticket
// only while the executor has a slot free for it (nothing queued, and more
// free slots than pulled tickets not yet handed to it), so a node with N
// slots holds up to N tickets, each run on a thread of its own through the
// executor, whose batch carries them together. Each sends InProgress every third of the
// ack wait so a long ticket is not redelivered, publishes token events to
// revis.events.<ticketID> (a redelivered ticket starts with `retry`), then
// the final `done` or `error` to revis.results.<ticketID>
// (Nats-Msg-Id: ticketID), and acks only once that result is stored. A
// ticket that can never run (malformed, unknown task, bad args, another
// catalogue) gets one `error` result and is terminated, never redelivered.
// A ticket whose result already exists (its first run ended after the
// result was stored, before the ack) is acked without running again; one
// whose result the broker cannot look up yet is given back, not run. A
// job cancelled by shutdown is given back (nak) for another node. A result
// that cannot be stored because the broker is down is kept and published
// once it is back, then acked: a finished run is never thrown away.
//
// Cancels: a `cancel` published to revis.cancel.<ticketID> (core NATS; a
// node's Desk sends it for its client) stops the run of that ticket on
// whichever node runs it; the run ends with an `error`/`cancelled` result
// and is acked, not redelivered.
//
// Max deliver: when JetStream gives up on a ticket (delivered
// broker_max_deliver times, never acked: its nodes died or lost the broker),
// it tells every node (the MAX_DELIVERIES advisory); they store one `error`
// result for it (Nats-Msg-Id: ticketID, so one however many nodes heard it)
// and delete the ticket from REVIS_TICKETS.
//
// A node whose catalogue digest differs from the one REVIS_TICKETS records
// refuses to pull, and says why in its log and status. While the broker is
// unreachable the worker waits for the connection to come back (libnats
// reconnects), then sets up the streams and consumers again.
//
// Thread-safety: start/stop from one thread; request_stop, status_json, metrics_text and
// refusal from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "broker/connection.h"
#include "broker/pull.h"
#include "broker/streams.h"
#include "node/node.h"
#include "base/mutex.h"

namespace revis::broker {

class Worker {
 public:
  Worker(node::Node& node, Connection& conn, StreamSettings streams, ConsumerSettings consumers);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The task types this node pulls.
  std::vector<std::string> tasks() const;
  // Starts the pulling thread; hooks the executor's observer (before the
  // node starts).
  void start();
  // Stops pulling: at once if idle, else once the tickets in flight end
  // (the executor's shutdown cancels them: they are given back).
  // request_stop() does not wait; stop() joins the threads.
  void request_stop();
  void stop();

  // {"connected","server","catalogRefused","consumers":{task:{pending,...}},"counters":{...}}
  std::string status_json() const;
  std::string metrics_text() const;

 private:
  struct Stats {
    bool connected = false;
    std::string server, refusal;
    std::map<std::string, ConsumerStats> consumers;
    uint64_t pulled = 0, done = 0, failed = 0, terminated = 0, given_back = 0, duplicates = 0, cancelled = 0, given_up = 0;
  };
  // A ticket being run: a cancel for it stops its job.
  struct Running {
    uint64_t job = 0;  // 0: not submitted yet
    bool cancelled = false;
  };
  // The thread running one pulled ticket.
  struct Runner {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  void loop();
  bool set_up();
  void refresh_stats();
  // Tickets the executor could start now beyond those pulled and not yet
  // handed to it; 0 while it is not ready, stopping, or jobs wait.
  int room() const EXCLUDES(mu_);
  // Joins the runners whose ticket is done.
  void reap_runners();
  // Runs a pulled ticket, on its runner's thread.
  void run(std::unique_ptr<Delivery> delivery, const std::string& task);
  // The run of a parsed ticket, with running_[id] set; `handed` is called
  // once it is submitted to the executor.
  void execute(Delivery& delivery, node::Ticket ticket, node::Clock::time_point received,
               const std::function<void()>& handed);
  // One pulled ticket fewer waits to reach the executor.
  void handed_over() EXCLUDES(mu_);
  // An error result, then Term: the ticket can never run.
  void poison(Delivery& delivery, const std::optional<std::string>& id, const node::NodeError& error);
  void wait(std::chrono::milliseconds d);
  // The core subscriptions: doorbell, cancels, max-deliver advisories.
  void subscribe();
  void on_cancel(const std::string& id) EXCLUDES(mu_);
  void on_max_deliveries(const std::string& advisory);
  // How often a held ticket is marked InProgress: a third of the ack wait.
  std::chrono::milliseconds heartbeat() const;
  // Whether ticket `id` has a stored result, asking a few times over a
  // couple of seconds (InProgress between tries); nullopt when the broker
  // could not say.
  std::optional<bool> earlier_result(Delivery& delivery, const std::string& id);
  // Publishes a result, waiting out a broker outage; false when the node
  // stops first (the ticket is then redelivered).
  bool store_result(Delivery& delivery, const std::string& id, const std::string& event);
  // Adds one to a counter.
  void count(uint64_t Stats::*counter) EXCLUDES(mu_);

  node::Node& node_;
  Connection& conn_;
  const StreamSettings streams_;
  const ConsumerSettings consumers_;
  std::vector<std::unique_ptr<PullConsumer>> pull_;  // worker thread only
  std::vector<std::unique_ptr<Subscription>> subscriptions_;  // doorbell (any ticket published: look now), cancels, advisories
  size_t next_ = 0;                                  // round robin over pull_
  std::chrono::steady_clock::time_point stats_at_{};

  mutable Mutex mu_;
  CondVar wake_;
  bool stop_ GUARDED_BY(mu_) = false;
  bool rung_ GUARDED_BY(mu_) = false;
  Stats stats_ GUARDED_BY(mu_);
  std::map<std::string, Running> running_ GUARDED_BY(mu_);  // by ticketID
  int unhanded_ GUARDED_BY(mu_) = 0;  // pulled tickets not yet submitted to the executor
  std::vector<Runner> runners_;        // loop thread only
  std::thread thread_;
};

}  // namespace revis::broker
