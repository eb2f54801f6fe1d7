#include "broker/worker.h"

#include <nlohmann/json.hpp>

#include "api/ticket_job.h"
#include "base/log.h"
#include "protocol/ticket.h"

namespace revis::broker {

using nlohmann::json;
using node::ErrorCode;
using node::NodeError;

namespace {
// How long the idle worker waits for the doorbell before it looks anyway
// (redelivered tickets do not ring it).
constexpr auto kPollInterval = std::chrono::milliseconds(250);
constexpr auto kStatsInterval = std::chrono::seconds(1);
// A lookup of an earlier result fails while the broker is away or still
// recovering its streams: it is tried this often before the ticket is given back.
constexpr int kResultLookupAttempts = 10;
constexpr auto kResultLookupPause = std::chrono::milliseconds(200);
}  // namespace

Worker::Worker(node::Node& node, Connection& conn, StreamSettings streams, ConsumerSettings consumers)
    : node_(node), conn_(conn), streams_(streams), consumers_(consumers) {}

Worker::~Worker() { stop(); }

std::vector<std::string> Worker::tasks() const {
  std::vector<std::string> tasks;
  for (const auto& [name, task] : node_.catalog().tasks())
    if (node_.serves_tier(task.tier)) tasks.push_back(name);
  tasks.insert(tasks.end(), node::kOpenAiTasks.begin(), node::kOpenAiTasks.end());
  return tasks;
}

void Worker::start() {
  node_.executor().set_observer([this] { wake_.notify_all(); });
  thread_ = std::thread([this] { loop(); });
}

void Worker::request_stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
}

void Worker::stop() {
  request_stop();
  if (thread_.joinable()) thread_.join();
}

void Worker::wait(std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + d;
  while (!stop_ && !rung_)
    if (!wake_.wait_until(mu_, deadline)) break;
  rung_ = false;
}

int Worker::room() const {
  const node::ExecutorSnapshot s = node_.executor().snapshot();
  if (!s.ready || s.stopping || s.queue_length > 0) return 0;
  MutexLock lock(mu_);
  return s.free_slots() - unhanded_;
}

void Worker::handed_over() {
  MutexLock lock(mu_);
  --unhanded_;
}

void Worker::reap_runners() {
  std::erase_if(runners_, [](Runner& r) {
    if (!r.done->load()) return false;
    r.thread.join();
    return true;
  });
}

// Streams, the catalogue check, consumers and their subscriptions.
bool Worker::set_up() {
  pull_.clear();
  auto recorded = ensure_streams(conn_, streams_);
  if (recorded.ok() && recorded->empty()) recorded = record_catalog(conn_, node_.catalog().digest());
  std::string refusal;
  if (!recorded.ok()) {
    refusal = recorded.status().message();
  } else if (*recorded != node_.catalog().digest()) {
    refusal = "the broker's " + std::string(kTicketStream) + " records catalogue " + *recorded + ", this node has " +
              node_.catalog().digest() + ": it does not pull tickets written for another catalogue";
  }
  for (const std::string& task : tasks()) {
    if (!refusal.empty()) break;
    if (Status s = ensure_consumer(conn_, task, consumers_); !s.ok()) {
      refusal = s.message();
      break;
    }
    auto pc = PullConsumer::bind(conn_, task);
    if (!pc.ok()) {
      refusal = pc.status().message();
      break;
    }
    pull_.push_back(std::move(*pc));
  }
  if (refusal.empty() && subscriptions_.empty()) subscribe();
  bool changed;
  {
    MutexLock lock(mu_);
    changed = stats_.refusal != refusal;
    stats_.refusal = refusal;
  }
  if (!refusal.empty()) {
    pull_.clear();
    if (changed) revis::log_line("error", "broker: not pulling: " + refusal);
    return false;
  }
  revis::log_line("info", "broker: pulling " + std::to_string(pull_.size()) + " task types from " + conn_.server());
  return true;
}

void Worker::subscribe() {
  const std::string cancels = cancel_subject("");
  const std::pair<std::string, std::function<void(const Message&)>> subjects[] = {
      {"revis.tickets.>",
       [this](const Message&) {
         {
           MutexLock lock(mu_);
           rung_ = true;
         }
         wake_.notify_all();
       }},
      {cancels + "*", [this, cancels](const Message& m) { on_cancel(m.subject.substr(cancels.size())); }},
      {kMaxDeliveriesAdvisory, [this](const Message& m) { on_max_deliveries(m.data); }},
  };
  for (const auto& [subject, handler] : subjects) {
    auto sub = conn_.subscribe(subject, handler);
    if (!sub.ok()) {
      revis::log_line("warn", sub.status().message());
      subscriptions_.clear();  // all again at the next set-up
      return;
    }
    subscriptions_.push_back(std::move(*sub));
  }
}

void Worker::count(uint64_t Stats::*counter) {
  MutexLock lock(mu_);
  ++(stats_.*counter);
}

void Worker::on_cancel(const std::string& id) {
  uint64_t job = 0;
  {
    MutexLock lock(mu_);
    auto running = running_.find(id);
    if (running == running_.end()) return;  // not running here
    running->second.cancelled = true;
    job = running->second.job;
  }
  revis::log_line("info", "broker: ticket " + id + " cancelled by its client");
  if (job) node_.executor().cancel(job, "cancelled by the client");
}

namespace {
// The ticketID of a message of REVIS_TICKETS, when it has one.
std::optional<std::string> ticket_id_of(const std::variant<node::ClientMessage, node::RejectedMessage>& parsed) {
  if (const auto* rejected = std::get_if<node::RejectedMessage>(&parsed)) return rejected->ticket_id;
  if (const auto* ticket = std::get_if<node::Ticket>(&std::get<node::ClientMessage>(parsed))) return ticket->id;
  return std::nullopt;
}
}  // namespace

void Worker::on_max_deliveries(const std::string& advisory) {
  const json a = json::parse(advisory, nullptr, false);
  if (a.is_discarded() || !a.contains("stream_seq") || !a["stream_seq"].is_number_unsigned()) return;
  const uint64_t seq = a["stream_seq"].get<uint64_t>();
  const std::string deliveries = a.contains("deliveries") ? a["deliveries"].dump() : "max";
  auto data = conn_.message_at(kTicketStream, seq);
  if (!data.ok()) return revis::log_line("warn", data.status().message());
  if (!*data) return;  // another node has seen to it
  const auto id = ticket_id_of(node::parse_ticket_subject_message(**data, node_.config().max_message_bytes));
  if (id) {
    auto existing = conn_.last_message(kResultStream, result_subject(*id));
    if (!existing.ok()) return revis::log_line("warn", existing.status().message());
    const NodeError error{ErrorCode::kInternal, "ticket " + *id + " was delivered " + deliveries +
                                                    " times and never finished (the nodes running it died or lost the broker): "
                                                    "the broker gave up on it (broker_max_deliver)"};
    if (!*existing)
      if (Status s = conn_.publish(result_subject(*id), node::error_event(id, error).text(), *id); !s.ok())
        return revis::log_line("warn", s.message());
  }
  auto deleted = conn_.delete_message(kTicketStream, seq);
  if (!deleted.ok()) return revis::log_line("warn", deleted.status().message());
  if (!*deleted) return;
  revis::log_line("warn", "broker: ticket " + id.value_or("(no id)") + " reached max deliver (" + deliveries + "): error result stored");
  count(&Stats::given_up);
}

std::chrono::milliseconds Worker::heartbeat() const {
  return std::chrono::milliseconds(std::max<int64_t>(consumers_.ack_wait_ms / 3, 50));
}

std::optional<bool> Worker::earlier_result(Delivery& delivery, const std::string& id) {
  Status failure = Status::error("not tried");
  for (int attempt = 0; attempt < kResultLookupAttempts; ++attempt) {
    if (attempt > 0) {
      wait(kResultLookupPause);
      if (conn_.connected()) delivery.in_progress();
    }
    auto existing = conn_.last_message(kResultStream, result_subject(id));
    if (existing.ok()) return existing->has_value();
    failure = existing.status();
    MutexLock lock(mu_);
    if (stop_) break;
  }
  revis::log_line("warn", failure.message() + "; ticket " + id + " is given back, not run: it may have a result already");
  return std::nullopt;
}

bool Worker::store_result(Delivery& delivery, const std::string& id, const std::string& event) {
  bool told = false;
  for (int failed_connected = 0;; told = true) {
    // Tries no longer than a heartbeat, each with InProgress first: a
    // publish lost to a broker restart must not outwait the ack wait, or
    // the ticket goes to another node while this one still holds its
    // result. A retry has the same Nats-Msg-Id: a try that was stored
    // after all is not stored twice.
    if (told && conn_.connected()) delivery.in_progress();
    Status s = conn_.publish(result_subject(id), event, id, static_cast<int>(heartbeat().count()));
    if (s.ok()) return true;
    {
      MutexLock lock(mu_);
      if (stop_) break;
    }
    if (conn_.connected() && ++failed_connected > 100) break;
    if (!told) revis::log_line("warn", s.message() + "; the result of ticket " + id + " is published once the broker is back");
    // Publishes again as soon as the connection is back, before the broker
    // redelivers the ticket to a node that would run it again.
    wait(std::chrono::milliseconds(10));
  }
  revis::log_line("warn", "broker: the result of ticket " + id + " was not stored; the ticket will be redelivered");
  return false;
}

void Worker::refresh_stats() {
  const auto now = std::chrono::steady_clock::now();
  if (now - stats_at_ < kStatsInterval) return;
  stats_at_ = now;
  const bool up = conn_.connected();
  std::map<std::string, ConsumerStats> consumers;
  if (up)
    for (const auto& pc : pull_)
      if (auto s = consumer_stats(conn_, pc->task()); s.ok()) consumers[pc->task()] = *s;
  MutexLock lock(mu_);
  stats_.connected = up;
  stats_.server = conn_.server();
  if (up) stats_.consumers = std::move(consumers);
}

void Worker::loop() {
  bool ready = false;
  auto retry = std::chrono::milliseconds(200);
  for (;;) {
    reap_runners();
    {
      MutexLock lock(mu_);
      if (stop_) break;
    }
    refresh_stats();
    if (!conn_.connected()) {
      ready = false;  // consumers may be gone with a restarted server's state: set up again
      wait(std::chrono::milliseconds(100));
      continue;
    }
    if (!ready) {
      ready = set_up();
      if (!ready) {
        wait(retry);
        retry = std::min(retry * 2, std::chrono::milliseconds(5000));
        continue;
      }
      retry = std::chrono::milliseconds(200);
    }
    if (room() <= 0) {
      wait(kPollInterval);
      continue;
    }
    bool got = false;
    for (size_t i = 0; i < pull_.size() && !got; ++i) {
      PullConsumer& pc = *pull_[(next_ + i) % pull_.size()];
      auto d = pc.fetch_one(0);
      if (!d.ok()) {
        revis::log_line("warn", d.status().message());
        ready = false;
        break;
      }
      if (*d) {
        got = true;
        next_ = (next_ + i + 1) % pull_.size();
        {
          MutexLock lock(mu_);
          ++unhanded_;
        }
        auto done = std::make_shared<std::atomic<bool>>(false);
        std::thread thread([this, done, delivery = std::move(*d), task = pc.task()]() mutable {
          run(std::move(delivery), task);
          done->store(true);
          wake_.notify_all();  // a slot may be free: pull again
        });
        runners_.push_back({std::move(thread), std::move(done)});
      }
    }
    if (!got && ready) wait(kPollInterval);
  }
  for (Runner& r : runners_) r.thread.join();
  runners_.clear();
}

void Worker::poison(Delivery& delivery, const std::optional<std::string>& id, const NodeError& error) {
  revis::log_line("warn", "broker: ticket " + id.value_or("(no id)") + " can never run, terminated: " + error.message);
  if (id)
    if (Status s = conn_.publish(result_subject(*id), node::error_event(id, error).text(), *id); !s.ok()) {
      revis::log_line("warn", s.message());
      return;  // no result stored: not terminated either, it comes back after the ack wait
    }
  if (Status s = delivery.term(); !s.ok()) revis::log_line("warn", s.message());
  MutexLock lock(mu_);
  ++stats_.terminated;
}

void Worker::run(std::unique_ptr<Delivery> delivery, const std::string& task) {
  const auto received = node::Clock::now();
  {
    MutexLock lock(mu_);
    ++stats_.pulled;
  }
  // Whatever way the run goes, the ticket stops counting as pulled and not
  // handed over once it reaches the executor or ends before that.
  struct Handed {
    Worker* worker;
    bool done = false;
    void now() {
      if (!done) worker->handed_over();
      done = true;
    }
    ~Handed() { now(); }
  } handed{this};
  auto parsed = node::parse_ticket_subject_message(delivery->data(), node_.config().max_message_bytes);
  if (auto* rejected = std::get_if<node::RejectedMessage>(&parsed)) return poison(*delivery, rejected->ticket_id, rejected->error);
  auto* ticket = std::get_if<node::Ticket>(&std::get<node::ClientMessage>(parsed));
  if (!ticket) return poison(*delivery, std::nullopt, {ErrorCode::kBadRequest, "a message on " + delivery->subject() + " is not a ticket"});
  const std::string id = ticket->id;
  if (ticket->task != task)
    return poison(*delivery, id, {ErrorCode::kBadRequest, "ticket of taskType " + ticket->task + " published to " + delivery->subject()});
  {
    MutexLock lock(mu_);
    running_[id] = Running{};
  }
  execute(*delivery, std::move(*ticket), received, [&handed] { handed.now(); });
  MutexLock lock(mu_);
  running_.erase(id);
}

void Worker::execute(Delivery& delivery, node::Ticket ticket, node::Clock::time_point received,
                     const std::function<void()>& handed) {
  const std::string id = ticket.id;
  // Its first run stored a result and died before the ack, or a client
  // cancelled it before it started: done already. Not knowing is not "no":
  // a lookup that fails (a restarted broker still recovering its streams)
  // gives the ticket back rather than run it a second time.
  const std::optional<bool> earlier = earlier_result(delivery, id);
  if (!earlier) {
    delivery.nak();
    return count(&Stats::given_back);
  }
  if (*earlier) {
    if (Status s = delivery.ack(); !s.ok()) revis::log_line("warn", s.message());
    return count(&Stats::duplicates);
  }
  node::read_ticket_job(ticket, node_);  // from the broker: read here, once
  auto spec = node_.admit(ticket, received);
  if (!spec.ok()) return poison(delivery, id, spec.error());
  const std::string events = event_subject(id);
  if (const uint64_t n = delivery.delivery_count(); n > 1 && ticket.streaming)
    conn_.publish_core(events, node::retry_event(id, static_cast<int>(n), "the broker redelivered it: an earlier run did not finish").text());

  struct Finish {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<node::Outcome<node::JobResult>> outcome;
  };
  auto finish = std::make_shared<Finish>();
  node::JobCallbacks callbacks;
  if (ticket.streaming)
    node::stream_token_events(callbacks, id, [this, events](node::TicketEvent event) { conn_.publish_core(events, event.text()); });
  callbacks.on_finish = [finish](node::Outcome<node::JobResult> outcome) {
    std::lock_guard<std::mutex> lock(finish->mu);
    finish->outcome = std::move(outcome);
    finish->cv.notify_all();
  };
  auto admission = node_.executor().submit(std::move(*spec), std::move(callbacks));
  handed();
  if (!admission.ok()) {
    delivery.nak();
    return count(&Stats::given_back);
  }
  bool cancelled;
  {
    MutexLock l(mu_);
    Running& running = running_[id];
    running.job = admission->job_id;
    cancelled = running.cancelled;  // a cancel came before the job existed
  }
  if (cancelled) node_.executor().cancel(admission->job_id, "cancelled by the client");
  std::unique_lock<std::mutex> lock(finish->mu);
  while (!finish->cv.wait_for(lock, heartbeat(), [&] { return finish->outcome.has_value(); })) {
    lock.unlock();
    if (Status s = delivery.in_progress(); !s.ok()) revis::log_line("warn", s.message());
    lock.lock();
  }
  node::Outcome<node::JobResult> outcome = std::move(*finish->outcome);
  lock.unlock();
  if (outcome.ok()) node::log_job_run(id, outcome->stats);  // every finished run, stored or not
  {
    MutexLock l(mu_);
    cancelled = running_[id].cancelled;
  }
  if (!outcome.ok() && outcome.error().code == ErrorCode::kCancelled && !cancelled) {
    delivery.nak();  // shutdown: another node runs it
    return count(&Stats::given_back);
  }
  const std::string final_event = (outcome.ok() ? node::done_event(id, *outcome) : node::error_event(id, outcome.error())).text();
  if (!store_result(delivery, id, final_event)) return;  // no ack: redelivered after the ack wait
  if (Status s = delivery.ack(); !s.ok()) revis::log_line("warn", s.message());
  count(outcome.ok() ? &Stats::done : outcome.error().code == ErrorCode::kCancelled ? &Stats::cancelled : &Stats::failed);
}

std::string Worker::status_json() const {
  MutexLock lock(mu_);
  json consumers = json::object();
  for (const auto& [task, c] : stats_.consumers)
    consumers[task] = {{"pending", c.pending}, {"ackPending", c.ack_pending}, {"redelivered", c.redelivered}, {"waiting", c.waiting}};
  return json{{"connected", stats_.connected},
              {"server", stats_.server},
              {"refusal", stats_.refusal.empty() ? json(nullptr) : json(stats_.refusal)},
              {"consumers", consumers},
              {"counters",
               {{"pulled", stats_.pulled},
                {"done", stats_.done},
                {"failed", stats_.failed},
                {"terminated", stats_.terminated},
                {"givenBack", stats_.given_back},
                {"duplicates", stats_.duplicates},
                {"cancelled", stats_.cancelled},
                {"givenUp", stats_.given_up}}}}
      .dump();
}

std::string Worker::metrics_text() const {
  MutexLock lock(mu_);
  std::string out;
  out += "# HELP revis_broker_connected Whether the node is connected to its NATS broker.\n";
  out += "# TYPE revis_broker_connected gauge\n";
  out += "revis_broker_connected " + std::string(stats_.connected ? "1" : "0") + "\n";
  out += "# HELP revis_broker_pulling Whether the node pulls tickets (0: refused, see status).\n";
  out += "# TYPE revis_broker_pulling gauge\n";
  out += "revis_broker_pulling " + std::string(stats_.refusal.empty() ? "1" : "0") + "\n";
  const std::pair<const char*, int64_t ConsumerStats::*> gauges[] = {
      {"ack_pending", &ConsumerStats::ack_pending}, {"redelivered", &ConsumerStats::redelivered}, {"waiting", &ConsumerStats::waiting}};
  out += "# HELP revis_broker_consumer_pending Tickets of a task type not yet delivered.\n";
  out += "# TYPE revis_broker_consumer_pending gauge\n";
  for (const auto& [task, c] : stats_.consumers)
    out += "revis_broker_consumer_pending{task=\"" + task + "\"} " + std::to_string(c.pending) + "\n";
  for (const auto& [name, field] : gauges) {
    out += "# HELP revis_broker_consumer_" + std::string(name) + " Tickets of a task type: " + name + ".\n";
    out += "# TYPE revis_broker_consumer_" + std::string(name) + " gauge\n";
    for (const auto& [task, c] : stats_.consumers)
      out += "revis_broker_consumer_" + std::string(name) + "{task=\"" + task + "\"} " + std::to_string(c.*field) + "\n";
  }
  out += "# HELP revis_broker_tickets_total Tickets this node pulled, by how they ended.\n";
  out += "# TYPE revis_broker_tickets_total counter\n";
  const std::pair<const char*, uint64_t> counters[] = {{"done", stats_.done},           {"failed", stats_.failed},
                                                       {"terminated", stats_.terminated}, {"given_back", stats_.given_back},
                                                       {"duplicate", stats_.duplicates}, {"cancelled", stats_.cancelled},
                                                       {"given_up", stats_.given_up}};
  for (const auto& [name, n] : counters)
    out += "revis_broker_tickets_total{outcome=\"" + std::string(name) + "\"} " + std::to_string(n) + "\n";
  return out;
}

}  // namespace revis::broker
