#include "broker/streams.h"

#include <nats/nats.h>

#include <cctype>
#include <memory>
#include <vector>

namespace revis::broker {

namespace {

constexpr int64_t kNsPerMs = 1000 * 1000;
constexpr const char* kTicketsDescription = "revis tickets";
constexpr const char* kResultsDescription = "revis results";
constexpr const char* kCatalogPrefix = "; catalog ";

struct StreamInfoDeleter {
  void operator()(jsStreamInfo* si) const { jsStreamInfo_Destroy(si); }
};
using StreamInfo = std::unique_ptr<jsStreamInfo, StreamInfoDeleter>;
struct ConsumerInfoDeleter {
  void operator()(jsConsumerInfo* ci) const { jsConsumerInfo_Destroy(ci); }
};
using ConsumerInfo = std::unique_ptr<jsConsumerInfo, ConsumerInfoDeleter>;

const char* retention_name(jsRetentionPolicy r) {
  switch (r) {
    case js_LimitsPolicy: return "limits";
    case js_InterestPolicy: return "interest";
    case js_WorkQueuePolicy: return "workqueue";
  }
  return "?";
}

std::string recorded_digest(const char* description) {
  const std::string d = description ? description : "";
  const size_t at = d.find(kCatalogPrefix);
  return at == std::string::npos ? "" : d.substr(at + std::string(kCatalogPrefix).size());
}

// The one stream `name` as the contract wants it.
struct WantedStream {
  const char* name;
  const char* subject;
  jsRetentionPolicy retention;
  jsStorageType storage;
  int64_t duplicates_ns;  // 0: the server's default (not checked)
  int64_t max_age_ns;     // 0: unlimited
  int64_t replicas;
};

Status mismatch(const Connection& conn, const char* stream, const char* field, const std::string& found,
                const std::string& expected) {
  return Status::error("broker: stream " + std::string(stream) + " on " + conn.server() + " has " + field + " " + found +
                       ", expected " + expected + " (revis never changes an existing stream: fix or delete it)");
}

Status verify_stream(const Connection& conn, const WantedStream& w, const jsStreamConfig& c) {
  if (c.SubjectsLen != 1 || std::string(c.Subjects[0]) != w.subject) {
    std::string found;
    for (int i = 0; i < c.SubjectsLen; ++i) {
      if (i > 0) found += ',';
      found += c.Subjects[i];
    }
    return mismatch(conn, w.name, "subjects", "[" + found + "]", std::string("[") + w.subject + "]");
  }
  if (c.Retention != w.retention)
    return mismatch(conn, w.name, "retention", retention_name(c.Retention), retention_name(w.retention));
  if (c.Storage != w.storage)
    return mismatch(conn, w.name, "storage", c.Storage == js_FileStorage ? "file" : "memory", "file");
  if (w.duplicates_ns && c.Duplicates != w.duplicates_ns)
    return mismatch(conn, w.name, "duplicate window", std::to_string(c.Duplicates / kNsPerMs) + " ms",
                    std::to_string(w.duplicates_ns / kNsPerMs) + " ms");
  if (c.Replicas != w.replicas)
    return mismatch(conn, w.name, "replicas", std::to_string(c.Replicas), std::to_string(w.replicas));
  if (c.MaxAge != w.max_age_ns)
    return mismatch(conn, w.name, "max age", std::to_string(c.MaxAge / kNsPerMs) + " ms",
                    std::to_string(w.max_age_ns / kNsPerMs) + " ms");
  return Status();
}

Result<StreamInfo> ensure_stream(Connection& conn, const WantedStream& w, const char* description, bool verify = true) {
  jsStreamInfo* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus ns = js_GetStreamInfo(&raw, conn.js(), w.name, nullptr, &jerr);
  if (ns == NATS_OK) {
    StreamInfo info(raw);
    if (Status s = verify_stream(conn, w, *info->Config); verify && !s.ok()) return s;
    return info;
  }
  if (!(ns == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr))
    return conn.error(ns, std::string("broker: reading stream ") + w.name);
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = w.name;
  cfg.Description = description;
  const char* subjects[] = {w.subject};
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Retention = w.retention;
  cfg.Storage = w.storage;
  cfg.Duplicates = w.duplicates_ns;
  cfg.MaxAge = w.max_age_ns;
  cfg.Replicas = w.replicas;
  ns = js_AddStream(&raw, conn.js(), &cfg, nullptr, &jerr);
  if (ns != NATS_OK && jerr == JSStreamNameExistErr)  // another node was first, with other settings
    return ensure_stream(conn, w, description, verify);
  if (ns != NATS_OK) return conn.error(ns, std::string("broker: creating stream ") + w.name);
  return StreamInfo(raw);
}

WantedStream tickets_stream(const StreamSettings& s) {
  return {kTicketStream, "revis.tickets.>", js_WorkQueuePolicy, js_FileStorage, s.duplicate_window_ms * kNsPerMs, 0, s.replicas};
}

WantedStream results_stream(const StreamSettings& s) {
  return {kResultStream, "revis.results.>", js_LimitsPolicy, js_FileStorage, 0, s.results_max_age_ms * kNsPerMs, s.replicas};
}

}  // namespace

std::string ticket_subject(const std::string& task) { return "revis.tickets." + task; }
std::string result_subject(const std::string& ticket_id) { return "revis.results." + ticket_id; }
std::string event_subject(const std::string& ticket_id) { return "revis.events." + ticket_id; }
std::string cancel_subject(const std::string& ticket_id) { return "revis.cancel." + ticket_id; }

std::string consumer_name(const std::string& task) {
  std::string name = task;
  for (char& c : name)
    if (c == '.') c = '_';
  return name;
}

bool valid_task_name(const std::string& task) {
  if (task.empty() || task.front() == '.' || task.back() == '.' || task.find("..") != std::string::npos) return false;
  for (char c : task)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

Result<std::string> ensure_streams(Connection& conn, const StreamSettings& settings) {
  auto tickets = ensure_stream(conn, tickets_stream(settings), kTicketsDescription);
  if (!tickets.ok()) return tickets.status();
  if (auto r = ensure_stream(conn, results_stream(settings), kResultsDescription); !r.ok()) return r.status();
  return recorded_digest((*tickets)->Config->Description);
}

Status ensure_streams_exist(Connection& conn, const StreamSettings& settings) {
  if (auto r = ensure_stream(conn, tickets_stream(settings), kTicketsDescription, false); !r.ok()) return r.status();
  if (auto r = ensure_stream(conn, results_stream(settings), kResultsDescription, false); !r.ok()) return r.status();
  return Status();
}

Result<std::string> record_catalog(Connection& conn, const std::string& digest) {
  jsStreamInfo* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus ns = js_GetStreamInfo(&raw, conn.js(), kTicketStream, nullptr, &jerr);
  if (ns != NATS_OK) return conn.error(ns, std::string("broker: reading stream ") + kTicketStream);
  StreamInfo info(raw);
  if (std::string recorded = recorded_digest(info->Config->Description); !recorded.empty()) return recorded;
  const std::string description = std::string(kTicketsDescription) + kCatalogPrefix + digest;
  jsStreamConfig cfg = *info->Config;  // the same configuration, one field changed
  cfg.Description = description.c_str();
  ns = js_UpdateStream(&raw, conn.js(), &cfg, nullptr, &jerr);
  if (ns != NATS_OK) return conn.error(ns, std::string("broker: recording the catalogue in stream ") + kTicketStream);
  StreamInfo updated(raw);
  return recorded_digest(updated->Config->Description);
}

Status ensure_consumer(Connection& conn, const std::string& task, const ConsumerSettings& settings) {
  if (!valid_task_name(task))
    return Status::error("broker: task \"" + task + "\" cannot be a NATS subject token (letters, digits, _ - .)");
  const std::string name = consumer_name(task), subject = ticket_subject(task);
  jsConsumerInfo* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus ns = js_GetConsumerInfo(&raw, conn.js(), kTicketStream, name.c_str(), nullptr, &jerr);
  if (ns == NATS_OK) {
    ConsumerInfo info(raw);
    const jsConsumerConfig& c = *info->Config;
    auto bad = [&](const char* field, const std::string& found, const std::string& expected) {
      return Status::error("broker: consumer " + name + " of stream " + kTicketStream + " on " + conn.server() + " has " +
                           field + " " + found + ", expected " + expected +
                           " (revis never changes an existing consumer: fix or delete it)");
    };
    const std::string filter = c.FilterSubject ? c.FilterSubject : "";
    if (filter != subject) return bad("filter subject", "\"" + filter + "\"", "\"" + subject + "\"");
    if (c.AckPolicy != js_AckExplicit) return bad("ack policy", std::to_string(int(c.AckPolicy)), "explicit");
    if (c.DeliverSubject && *c.DeliverSubject) return bad("deliver subject", c.DeliverSubject, "none (a pull consumer)");
    if (c.AckWait != settings.ack_wait_ms * kNsPerMs)
      return bad("ack wait", std::to_string(c.AckWait / kNsPerMs) + " ms", std::to_string(settings.ack_wait_ms) + " ms");
    if (c.MaxDeliver != settings.max_deliver)
      return bad("max deliver", std::to_string(c.MaxDeliver), std::to_string(settings.max_deliver));
    if (c.MaxAckPending != settings.max_ack_pending)
      return bad("max ack pending", std::to_string(c.MaxAckPending), std::to_string(settings.max_ack_pending));
    return Status();
  }
  if (!(ns == NATS_NOT_FOUND || jerr == JSConsumerNotFoundErr))
    return conn.error(ns, "broker: reading consumer " + name);
  jsConsumerConfig cfg;
  jsConsumerConfig_Init(&cfg);
  cfg.Durable = name.c_str();
  cfg.Description = "revis node pull consumer";
  cfg.FilterSubject = subject.c_str();
  cfg.AckPolicy = js_AckExplicit;
  cfg.AckWait = settings.ack_wait_ms * kNsPerMs;
  cfg.MaxDeliver = settings.max_deliver;
  cfg.MaxAckPending = settings.max_ack_pending;
  ns = js_AddConsumer(&raw, conn.js(), kTicketStream, &cfg, nullptr, &jerr);
  if (ns != NATS_OK) return conn.error(ns, "broker: creating consumer " + name + " of stream " + kTicketStream);
  jsConsumerInfo_Destroy(raw);
  return Status();
}

Result<uint64_t> stream_messages(Connection& conn, const std::string& stream) {
  jsStreamInfo* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus ns = js_GetStreamInfo(&raw, conn.js(), stream.c_str(), nullptr, &jerr);
  if (ns != NATS_OK) return conn.error(ns, "broker: reading stream " + stream);
  StreamInfo info(raw);
  return info->State.Msgs;
}

Result<ConsumerStats> consumer_stats(Connection& conn, const std::string& task) {
  const std::string name = consumer_name(task);
  jsConsumerInfo* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus ns = js_GetConsumerInfo(&raw, conn.js(), kTicketStream, name.c_str(), nullptr, &jerr);
  if (ns != NATS_OK) return conn.error(ns, "broker: reading consumer " + name);
  ConsumerInfo info(raw);
  return ConsumerStats{info->NumPending, info->NumAckPending, info->NumRedelivered, info->NumWaiting};
}

}  // namespace revis::broker
