// revis batch: run many tickets from a JSONL file through a node and write
// their results, in input order, as JSONL.
//
//   revis batch tickets.jsonl --node 127.0.0.1:8080 -o results.jsonl --concurrency 16
//   revis batch tickets.jsonl --broker nats://10.0.0.9:4222 -o results.jsonl --concurrency 256
//
// With --broker the tickets go to NATS JetStream directly
// (docs/scale-out.md); everything below holds the same way.
// Tickets go over one WebSocket connection (the ticket protocol of
// docs/protocol.md), several in flight at a time; the node queues them (and
// a node with peers spreads them over the cluster). A lost connection is
// re-established with backoff and the tickets that were in flight are sent
// again under the same ticketID, so a node that remembers tickets can tell
// a resend from a new ticket. A `queue_full` refusal is not a failure: the
// ticket waits and the number in flight shrinks to what the node holds.
//
// Results go out as soon as every earlier line's result is known. Progress
// (done/total, throughput, ETA) goes to stderr, then a summary with latency
// and overhead percentiles. Exit status: 0 when every ticket is done; 1 when
// any failed (they are listed, with line numbers, ticketIDs and error codes)
// or the node could not be reached; 2 when the input has malformed lines
// (all listed; nothing is sent).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/batch_file.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress_meter.h"
#include "cli/ticket_channel.h"
#include "hash/sha256.h"
#include "net/client.h"

namespace revis::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kConnectTimeoutMs = 10000;
constexpr auto kQueueFullPause = std::chrono::milliseconds(500);
constexpr size_t kFailuresListed = 20;

struct BatchArgs {
  ChannelTarget target;
  std::string file, catalog, output, summary;
  int concurrency = 16;
  int retries = 5;
  int timeout_s = 600;
};

struct TicketState {
  int attempts = 0;  // times sent
  Clock::time_point sent;
  bool finished = false, failed = false;
  json result;  // the results line
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

std::string random_prefix() {
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof buf, "b%08x", static_cast<unsigned>(rd()));
  return buf;
}

// Fields of a node's event, read without trusting their types: whatever
// the node sends, batch does not throw.
std::string text_field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

double number_field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

class BatchRun {
 public:
  BatchRun(const BatchArgs& args, std::vector<BatchTicket> tickets, std::FILE* out)
      : args_(args), tickets_(std::move(tickets)), out_(out), state_(tickets_.size()),
        window_(args.concurrency), meter_("batch", tickets_.size()) {
    for (size_t i = 0; i < tickets_.size(); ++i) pending_.insert(i);
  }

  int run() {
    while (finished_ < tickets_.size()) {
      if (!client_ && !connect()) {
        for (size_t i : pending_) fail(i, "unreachable", unreachable_reason_);
        pending_.clear();
        break;
      }
      send_ready();
      if (!client_) continue;
      if (in_flight_.empty()) {
        // Everything left was refused with queue_full: the node is busy
        // with others' work. Wait, then offer one ticket again.
        std::this_thread::sleep_until(resume_at_);
        continue;
      }
      auto message = client_->receive(args_.timeout_s * 1000);
      if (!message.ok()) {
        connection_lost(message.status().message() == "timeout"
                            ? "no message from the node for " + std::to_string(args_.timeout_s) + " s"
                            : message.status().message());
        continue;
      }
      handle(*message);
    }
    if (client_) client_->close();
    meter_.finish();
    std::fflush(out_);
    return report();
  }

 private:
  // Connects, retrying with backoff; false once `retries` attempts in a row
  // have failed or the node refuses us for good (an HTTP 4xx).
  bool connect() {
    for (int attempt = 0; attempt <= args_.retries; ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(backoff(attempt));
      auto client = open_channel(args_.target, kConnectTimeoutMs);
      if (client.ok()) {
        client_ = std::move(*client);
        return true;
      }
      unreachable_reason_ = client.status().message();
      if (unreachable_reason_.find("failed: HTTP 4") != std::string::npos) break;  // a wrong token stays wrong
      if (attempt < args_.retries)
        meter_.note("cannot connect to " + channel_name(args_.target) + " (" + unreachable_reason_ + "); retrying in " +
                    std::to_string(backoff(attempt + 1).count()) + " ms");
    }
    return false;
  }

  static std::chrono::milliseconds backoff(int attempt) {
    return std::chrono::milliseconds(std::min(8000, 500 << std::min(attempt - 1, 5)));
  }

  void send_ready() {
    while (client_ && in_flight_.size() < window_ && !pending_.empty() && Clock::now() >= resume_at_) {
      const size_t i = *pending_.begin();
      pending_.erase(pending_.begin());
      const BatchTicket& t = tickets_[i];
      json message = {{"type", "ticket"}, {"ticketID", t.id}, {"taskType", t.task}, {"args", t.args}};
      if (!args_.catalog.empty()) message["catalog"] = args_.catalog;
      TicketState& s = state_[i];
      ++s.attempts;
      s.sent = Clock::now();
      in_flight_[t.id] = i;  // before sending: a failed send requeues it with the rest
      if (Status sent = client_->send(message.dump()); !sent.ok()) return connection_lost(sent.message());
    }
  }

  void connection_lost(const std::string& why) {
    client_->abort();
    client_.reset();
    meter_.note("connection to " + channel_name(args_.target) + " lost (" + why + "); " + std::to_string(in_flight_.size()) +
                " ticket(s) in flight will be sent again");
    for (const auto& [id, i] : in_flight_) resend_or_fail(i, "transport", why);
    in_flight_.clear();
  }

  void resend_or_fail(size_t i, const std::string& code, const std::string& why) {
    if (state_[i].attempts > args_.retries)
      return fail(i, code, "gave up after " + std::to_string(state_[i].attempts) + " attempts: " + why);
    ++resent_;
    pending_.insert(i);
  }

  void handle(const std::string& text) {
    const json event = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!event.is_object()) return meter_.note("ignoring a message from the node that is not a JSON object");
    const std::string type = text_field(event, "type");
    if (type != "done" && type != "error") return;  // accepted, token, and events added later
    const std::string id = text_field(event, "ticketID");
    if (id.empty())
      return meter_.note("the node refused a message: " + text_field(event, "code") + ": " + text_field(event, "message"));
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) {
      ++unexpected_;  // a second terminal event, or one for a ticket we gave up on
      return;
    }
    const size_t i = it->second;
    in_flight_.erase(it);
    if (type == "done") {
      window_ = std::min<size_t>(window_ + 1, args_.concurrency);
      return done(i, event);
    }
    const std::string code = text_field(event, "code").empty() ? "internal" : text_field(event, "code");
    const std::string message = text_field(event, "message");
    if (code == "queue_full") {
      // Not an attempt: the node never took it. Keep no more in flight
      // than the node holds now.
      --state_[i].attempts;
      ++queue_full_;
      pending_.insert(i);
      window_ = std::max<size_t>(1, in_flight_.size());
      if (in_flight_.empty()) resume_at_ = Clock::now() + kQueueFullPause;
      return;
    }
    // We never cancel, so `cancelled` means the node dropped the ticket
    // (shutting down): like a lost connection, worth another attempt.
    if (code == "cancelled") return resend_or_fail(i, code, message);
    fail(i, code, message);
  }

  void done(size_t i, const json& event) {
    TicketState& s = state_[i];
    const BatchTicket& t = tickets_[i];
    const auto stats_it = event.find("stats");
    const json stats = stats_it != event.end() && stats_it->is_object() ? *stats_it : json::object();
    const double client_ms = ms_since(s.sent);
    s.result = {{"line", t.line},          {"ticketID", t.id},    {"taskType", t.task},
                {"status", "done"},        {"text", text_field(event, "text")},
                {"stopReason", text_field(event, "stopReason")}, {"stats", stats},
                {"attempts", s.attempts},  {"clientMs", client_ms}};
    latency_ms_.push_back(client_ms);
    const double computing = number_field(stats, "loadMs") + number_field(stats, "prefillMs") + number_field(stats, "generateMs");
    overhead_ms_.push_back(client_ms - computing);
    compute_ms_ += computing;
    const std::string node = text_field(stats, "node");
    ++by_node_[node.empty() ? "?" : node];
    const auto tokens = static_cast<uint64_t>(std::max(0.0, number_field(stats, "generatedTokens")));
    tokens_ += tokens;
    finish(i, false, tokens);
  }

  void fail(size_t i, const std::string& code, const std::string& message) {
    const BatchTicket& t = tickets_[i];
    state_[i].result = {{"line", t.line},   {"ticketID", t.id},      {"taskType", t.task},
                        {"status", "error"}, {"code", code},          {"message", message},
                        {"attempts", state_[i].attempts}};
    finish(i, true, 0);
  }

  void finish(size_t i, bool failed, uint64_t tokens) {
    TicketState& s = state_[i];
    s.finished = true;
    s.failed = failed;
    ++finished_;
    if (failed) ++failed_;
    meter_.record(failed, tokens);
    // Results leave in input order, as soon as all earlier ones are known.
    while (next_output_ < state_.size() && state_[next_output_].finished) {
      const std::string line = state_[next_output_].result.dump(-1, ' ', false, json::error_handler_t::replace);
      std::fprintf(out_, "%s\n", line.c_str());
      ++next_output_;
    }
  }

  int report() {
    const double wall_s = std::max(1e-9, std::chrono::duration<double>(Clock::now() - start_).count());
    const size_t done_count = tickets_.size() - failed_;
    std::fprintf(stderr, "batch: %zu tickets, %zu done, %zu failed in %.1f s: %.2f tickets/s, %.0f tok/s\n",
                 tickets_.size(), done_count, failed_, wall_s, done_count / wall_s, tokens_ / wall_s);
    if (!latency_ms_.empty())
      std::fprintf(stderr,
                   "latency (sent -> result): p50 %.1f ms, p99 %.1f ms; compute (load + prefill + generation): mean "
                   "%.1f ms; overhead (latency - compute): p50 %.1f ms, p99 %.1f ms\n",
                   percentile(latency_ms_, 0.50), percentile(latency_ms_, 0.99), compute_ms_ / latency_ms_.size(),
                   percentile(overhead_ms_, 0.50), percentile(overhead_ms_, 0.99));
    if (!by_node_.empty()) {
      std::string nodes;
      for (const auto& [name, n] : by_node_) nodes += (nodes.empty() ? "" : ", ") + name + " " + std::to_string(n);
      std::fprintf(stderr, "ran on: %s\n", nodes.c_str());
    }
    if (resent_ > 0 || queue_full_ > 0 || unexpected_ > 0)
      std::fprintf(stderr, "sent again after a lost connection or shutdown: %zu; after queue_full: %zu; unexpected results ignored: %zu\n",
                   resent_, queue_full_, unexpected_);
    if (!args_.summary.empty() && !write_summary(wall_s)) return cli::fail(args_.summary + ": cannot write the summary");
    if (failed_ == 0) return 0;
    std::fprintf(stderr, "failed: %zu of %zu tickets\n", failed_, tickets_.size());
    size_t listed = 0;
    for (size_t i = 0; i < state_.size() && listed < kFailuresListed; ++i) {
      if (!state_[i].failed) continue;
      const json& r = state_[i].result;
      std::fprintf(stderr, "  line %d (ticket %s): %s: %s\n", tickets_[i].line, tickets_[i].id.c_str(),
                   text_field(r, "code").c_str(), text_field(r, "message").c_str());
      ++listed;
    }
    if (failed_ > listed) std::fprintf(stderr, "  ... and %zu more (see the results)\n", failed_ - listed);
    return 1;
  }

  bool write_summary(double wall_s) {
    json nodes = json::object();
    for (const auto& [name, n] : by_node_) nodes[name] = n;
    const json summary = {
        {"tickets", tickets_.size()},
        {"done", tickets_.size() - failed_},
        {"failed", failed_},
        {"wallS", wall_s},
        {"ticketsPerS", (tickets_.size() - failed_) / wall_s},
        {"tokensPerS", tokens_ / wall_s},
        {"latencyP50Ms", percentile(latency_ms_, 0.5)},
        {"latencyP99Ms", percentile(latency_ms_, 0.99)},
        {"computeMeanMs", latency_ms_.empty() ? 0.0 : compute_ms_ / latency_ms_.size()},
        {"overheadP50Ms", percentile(overhead_ms_, 0.5)},
        {"overheadP99Ms", percentile(overhead_ms_, 0.99)},
        {"byNode", nodes},
        {"resent", resent_},
        {"queueFull", queue_full_},
        {"unexpected", unexpected_}};
    std::FILE* f = std::fopen(args_.summary.c_str(), "w");
    if (!f) return false;
    const std::string text = summary.dump(2) + "\n";
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    return std::fclose(f) == 0 && ok;
  }

  const BatchArgs& args_;
  const std::vector<BatchTicket> tickets_;
  std::FILE* out_;
  std::vector<TicketState> state_;
  std::set<size_t> pending_;                 // indices not yet sent (or to send again), lowest first
  std::map<std::string, size_t> in_flight_;  // ticketID -> index
  size_t window_;                            // tickets to keep in flight
  Clock::time_point resume_at_{};            // after queue_full with nothing in flight
  std::unique_ptr<TicketChannel> client_;
  std::string unreachable_reason_;
  ProgressMeter meter_;
  const Clock::time_point start_ = Clock::now();
  size_t finished_ = 0, failed_ = 0, next_output_ = 0;
  size_t resent_ = 0, queue_full_ = 0, unexpected_ = 0;
  uint64_t tokens_ = 0;
  std::vector<double> latency_ms_, overhead_ms_;
  double compute_ms_ = 0;  // load + prefill + generation, summed over done tickets
  std::map<std::string, size_t> by_node_;
};

int batch(const BatchArgs& args) {
  if (args.target.broker.empty())
    if (auto node = node::parse_host_port(args.target.node, 8080); !node.ok()) return fail(node.status().message());
  if (args.concurrency < 1) return usage_error("--concurrency must be at least 1");
  if (args.retries < 0) return usage_error("--retries must be 0 or more");
  if (args.timeout_s < 1) return usage_error("--timeout must be at least 1 second");
  std::string text;
  if (args.file == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    auto content = read_file(args.file);
    if (!content.ok()) return fail(content.status().message());
    text = std::move(*content);
  }
  // Through a broker, a line's ticketID (unless it names one) follows from
  // the file's content: running the same file again collects the results
  // the broker holds instead of running those tickets again.
  const std::string prefix = args.target.broker.empty() ? random_prefix() : "b" + sha256_hex(text).substr(0, 12);
  BatchFile input = parse_batch_file(text, args.file == "-" ? "stdin" : args.file, prefix);
  if (!input.errors.empty()) {
    for (const std::string& e : input.errors) std::fprintf(stderr, "error: %s\n", e.c_str());
    std::fprintf(stderr, "%zu malformed line(s); nothing was sent\n", input.errors.size());
    return 2;
  }
  if (input.tickets.empty()) return fail(args.file + ": no tickets (expected one JSON object per line)");

  std::FILE* out = stdout;
  if (!args.output.empty() && !(out = std::fopen(args.output.c_str(), "w")))
    return fail(args.output + ": cannot open for writing");
  const int code = BatchRun(args, std::move(input.tickets), out).run();
  if (out != stdout && std::fclose(out) != 0) return fail(args.output + ": write failed");
  return code;
}

}  // namespace

void register_batch(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("batch", "Run the tickets of a JSONL file through a node; results as JSONL, in input order");
  auto a = std::make_shared<BatchArgs>();
  cmd->add_option("file", a->file, "JSONL input: {\"taskType\": ..., \"args\": {...}, \"ticketID\": ...} per line (- for stdin)")
      ->required();
  cmd->add_option("--node", a->target.node, "Node address HOST:PORT")->capture_default_str();
  cmd->add_option("--broker", a->target.broker,
                  "NATS JetStream servers nats://HOST:PORT[,...] instead of a node (docs/scale-out.md); "
                  "running the same file again collects the results already there");
  cmd->add_option("--broker-creds", a->target.broker_creds, "NATS credentials file for --broker");
  cmd->add_option("--token", a->target.token, "Bearer token the node requires");
  cmd->add_option("--catalog", a->catalog, "Pin every ticket to this catalogue digest");
  cmd->add_option("-o,--output", a->output, "Results file (default: stdout)");
  cmd->add_option("--concurrency", a->concurrency, "Tickets in flight at once")->capture_default_str();
  cmd->add_option("--retries", a->retries, "Reconnects in a row, and resends per ticket, before giving up")
      ->capture_default_str();
  cmd->add_option("--timeout", a->timeout_s, "Seconds without any message from the node before reconnecting")
      ->capture_default_str();
  cmd->add_option("--summary", a->summary, "Also write the summary (throughput, latency percentiles) as JSON here");
  cmd->callback([a, &exit_code] { exit_code = batch(*a); });
}

}  // namespace revis::cli
