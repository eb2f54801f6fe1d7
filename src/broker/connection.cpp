#include "broker/connection.h"

#include <nats/nats.h>

#include <sstream>

namespace revis::broker {

Result<std::vector<std::string>> parse_server_list(const std::string& servers) {
  std::vector<std::string> urls;
  std::stringstream in(servers);
  std::string entry;
  while (std::getline(in, entry, ',')) {
    const size_t b = entry.find_first_not_of(" \t"), e = entry.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    entry = entry.substr(b, e - b + 1);
    if (entry.find("://") == std::string::npos) entry = "nats://" + entry;
    const size_t host = entry.find("://") + 3;
    if (entry.size() == host || entry.find_first_of(" \t", host) != std::string::npos)
      return Status::error("broker: server \"" + entry + "\" is not HOST:PORT (expected nats://HOST:PORT[,HOST:PORT...])");
    urls.push_back(entry);
  }
  if (urls.empty()) return Status::error("broker: no server given (expected nats://HOST:PORT[,HOST:PORT...])");
  return urls;
}

namespace {

Status check(natsStatus s, const char* what, const std::string& where) {
  if (s == NATS_OK) return Status();
  std::string detail = natsStatus_GetText(s);
  if (const char* last = nats_GetLastError(nullptr); last && *last && detail != last) detail += " (" + std::string(last) + ")";
  return Status::error(std::string(what) + " on " + where + ": " + detail);
}

struct Handler {
  std::function<void(const Message&)> fn;
};

void on_core_message(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  Message m{natsMsg_GetSubject(msg), std::string(natsMsg_GetData(msg), static_cast<size_t>(natsMsg_GetDataLength(msg)))};
  natsMsg_Destroy(msg);
  static_cast<Handler*>(closure)->fn(m);
}

// libnats calls it once the subscription is gone and no handler runs any more.
void on_subscription_complete(void* closure) { delete static_cast<Handler*>(closure); }

}  // namespace

Subscription::~Subscription() {
  natsSubscription_Unsubscribe(sub_);
  natsSubscription_Destroy(sub_);
}

Result<std::unique_ptr<Connection>> Connection::connect(const BrokerOptions& options) {
  auto urls = parse_server_list(options.servers);
  if (!urls.ok()) return urls.status();
  std::vector<const char*> list;
  for (const std::string& u : *urls) list.push_back(u.c_str());
  natsOptions* opts = nullptr;
  const std::string& where = options.servers;
  if (Status s = check(natsOptions_Create(&opts), "broker: setting up the connection", where); !s.ok()) return s;
  struct OptsGuard {
    natsOptions* o;
    ~OptsGuard() { natsOptions_Destroy(o); }
  } guard{opts};
  natsStatus ns = natsOptions_SetServers(opts, list.data(), static_cast<int>(list.size()));
  if (ns == NATS_OK && !options.name.empty()) ns = natsOptions_SetName(opts, options.name.c_str());
  if (ns == NATS_OK) ns = natsOptions_SetTimeout(opts, options.timeout_ms);
  // Reconnect forever, to any server of the list; publishes made while
  // disconnected fail at once (publish() checks connected()).
  if (ns == NATS_OK) ns = natsOptions_SetMaxReconnect(opts, -1);
  if (ns == NATS_OK) ns = natsOptions_SetReconnectWait(opts, 250);
  // With a connected callback (and only then) a failed first connect
  // returns at once and goes on in the background.
  if (ns == NATS_OK && options.retry_first_connect)
    ns = natsOptions_SetRetryOnFailedConnect(opts, true, [](natsConnection*, void*) {}, nullptr);
  if (Status s = check(ns, "broker: setting up the connection", where); !s.ok()) return s;
  if (!options.creds.empty())
    if (Status s = check(natsOptions_SetUserCredentialsFromFiles(opts, options.creds.c_str(), nullptr),
                         ("broker: reading the credentials file " + options.creds).c_str(), where);
        !s.ok())
      return s;
  if (!options.tls_ca.empty())
    if (Status s = check(natsOptions_LoadCATrustedCertificates(opts, options.tls_ca.c_str()),
                         ("broker: reading the CA file " + options.tls_ca).c_str(), where);
        !s.ok())
      return s;
  natsConnection* nc = nullptr;
  ns = natsConnection_Connect(&nc, opts);
  if (ns != NATS_OK && !(options.retry_first_connect && ns == NATS_NOT_YET_CONNECTED))
    return check(ns, "broker: connecting", where);
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = options.timeout_ms;
  jsCtx* js = nullptr;
  if (Status s = check(natsConnection_JetStream(&js, nc, &jo), "broker: opening JetStream", where); !s.ok()) {
    natsConnection_Destroy(nc);
    return s;
  }
  return std::unique_ptr<Connection>(new Connection(options, nc, js));
}

Connection::~Connection() {
  jsCtx_Destroy(js_);
  natsConnection_Close(nc_);
  natsConnection_Destroy(nc_);
}

bool Connection::connected() const { return natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED; }

std::string Connection::server() const {
  char url[512];
  if (connected() && natsConnection_GetConnectedUrl(nc_, url, sizeof url) == NATS_OK && url[0]) return url;
  return options_.servers;
}

Status Connection::error(int nats_status, const std::string& what) const {
  return check(static_cast<natsStatus>(nats_status), what.c_str(), server());
}

Status Connection::publish(const std::string& subject, std::string_view data, const std::string& msg_id, int timeout_ms) {
  if (!connected()) return Status::error("broker: publishing to " + subject + ": not connected to " + options_.servers);
  natsMsg* msg = nullptr;
  natsStatus ns = natsMsg_Create(&msg, subject.c_str(), nullptr, data.data(), static_cast<int>(data.size()));
  if (ns == NATS_OK) ns = natsMsgHeader_Set(msg, "Nats-Msg-Id", msg_id.c_str());
  jsPubAck* ack = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = timeout_ms > 0 ? timeout_ms : options_.timeout_ms;
  if (ns == NATS_OK) ns = js_PublishMsg(&ack, js_, msg, &po, &jerr);
  natsMsg_Destroy(msg);
  jsPubAck_Destroy(ack);
  return error(ns, "broker: publishing to " + subject);
}

Status Connection::publish_core(const std::string& subject, std::string_view data) {
  return error(natsConnection_Publish(nc_, subject.c_str(), data.data(), static_cast<int>(data.size())),
               "broker: publishing to " + subject);
}

Result<std::unique_ptr<Subscription>> Connection::subscribe(const std::string& subject,
                                                            std::function<void(const Message&)> on_message) {
  auto* handler = new Handler{std::move(on_message)};
  natsSubscription* sub = nullptr;
  natsStatus ns = natsConnection_Subscribe(&sub, nc_, subject.c_str(), on_core_message, handler);
  if (ns != NATS_OK) {
    delete handler;
    return error(ns, "broker: subscribing to " + subject);
  }
  natsSubscription_SetPendingLimits(sub, -1, -1);
  if (ns = natsSubscription_SetOnCompleteCB(sub, on_subscription_complete, handler); ns != NATS_OK) {
    natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
    return error(ns, "broker: subscribing to " + subject);  // the handler leaks rather than risk a late call
  }
  return std::make_unique<Subscription>(sub);
}

Status Connection::flush() { return error(natsConnection_FlushTimeout(nc_, options_.timeout_ms), "broker: flushing"); }

namespace {
// The data of a message a direct get returned (NATS_NOT_FOUND: none).
Result<std::optional<std::string>> stored_data(const Connection& conn, natsStatus ns, natsMsg* msg, const std::string& what) {
  if (ns == NATS_NOT_FOUND) return std::optional<std::string>();
  if (ns != NATS_OK) return conn.error(ns, what);
  std::string data(natsMsg_GetData(msg), static_cast<size_t>(natsMsg_GetDataLength(msg)));
  natsMsg_Destroy(msg);
  return std::optional<std::string>(std::move(data));
}
}  // namespace

Result<std::optional<std::string>> Connection::last_message(const std::string& stream, const std::string& subject) {
  natsMsg* msg = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus ns = js_GetLastMsg(&msg, js_, stream.c_str(), subject.c_str(), nullptr, &jerr);
  return stored_data(*this, ns, msg, "broker: reading " + subject + " from stream " + stream);
}

Result<std::optional<std::string>> Connection::message_at(const std::string& stream, uint64_t seq) {
  natsMsg* msg = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus ns = js_GetMsg(&msg, js_, stream.c_str(), seq, nullptr, &jerr);
  return stored_data(*this, ns, msg, "broker: reading message " + std::to_string(seq) + " of stream " + stream);
}

Result<bool> Connection::delete_message(const std::string& stream, uint64_t seq) {
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus ns = js_DeleteMsg(js_, stream.c_str(), seq, nullptr, &jerr);
  if (ns == NATS_OK) return true;
  if (ns == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr || jerr == JSStreamMsgDeleteFailed) return false;
  return error(ns, "broker: deleting message " + std::to_string(seq) + " of stream " + stream);
}

}  // namespace revis::broker
