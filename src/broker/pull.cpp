#include "broker/pull.h"

#include <nats/nats.h>

#include <algorithm>

#include "broker/streams.h"

namespace revis::broker {

Delivery::~Delivery() { natsMsg_Destroy(msg_); }

std::string Delivery::data() const {
  return std::string(natsMsg_GetData(msg_), static_cast<size_t>(natsMsg_GetDataLength(msg_)));
}

std::string Delivery::subject() const { return natsMsg_GetSubject(msg_); }

uint64_t Delivery::delivery_count() const {
  jsMsgMetaData* meta = nullptr;
  if (natsMsg_GetMetaData(&meta, msg_) != NATS_OK) return 1;
  const uint64_t n = meta->NumDelivered;
  jsMsgMetaData_Destroy(meta);
  return n;
}

Status Delivery::ack() {
  jsErrCode jerr = static_cast<jsErrCode>(0);
  return conn_.error(natsMsg_AckSync(msg_, nullptr, &jerr), "broker: acknowledging " + subject());
}
Status Delivery::in_progress() { return conn_.error(natsMsg_InProgress(msg_, nullptr), "broker: in-progress of " + subject()); }
Status Delivery::term() { return conn_.error(natsMsg_Term(msg_, nullptr), "broker: terminating " + subject()); }
Status Delivery::nak() { return conn_.error(natsMsg_Nak(msg_, nullptr), "broker: giving back " + subject()); }

Result<std::unique_ptr<PullConsumer>> PullConsumer::bind(Connection& conn, const std::string& task) {
  jsSubOptions so;
  jsSubOptions_Init(&so);
  const std::string name = consumer_name(task);
  so.Stream = kTicketStream;
  so.Consumer = name.c_str();
  natsSubscription* sub = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus ns = js_PullSubscribe(&sub, conn.js(), ticket_subject(task).c_str(), name.c_str(), nullptr, &so, &jerr);
  if (ns != NATS_OK) return conn.error(ns, "broker: binding to consumer " + name + " of stream " + kTicketStream);
  return std::unique_ptr<PullConsumer>(new PullConsumer(conn, task, sub));
}

PullConsumer::~PullConsumer() {
  // Destroy, not Unsubscribe: unsubscribing a durable pull subscription
  // that libnats bound would delete the consumer every node shares.
  natsSubscription_Destroy(sub_);
}

Result<std::unique_ptr<Delivery>> PullConsumer::fetch_one(int wait_ms) {
  jsFetchRequest req;
  jsFetchRequest_Init(&req);
  req.Batch = 1;
  req.NoWait = wait_ms <= 0;
  // libnats 3.4 waits for Expires even when a NoWait request is answered
  // "no messages" at once; two round trips are enough for the answer.
  if (req.NoWait && rtt_ns_ == 0) {
    int64_t rtt = 0;
    if (natsConnection_GetRTT(conn_.nc(), &rtt) == NATS_OK) rtt_ns_ = std::max<int64_t>(rtt * 2 + 1000000, 2000000);
  }
  req.Expires = req.NoWait ? (rtt_ns_ ? rtt_ns_ : 2000000) : static_cast<int64_t>(wait_ms) * 1000 * 1000;
  natsMsgList list{nullptr, 0};
  natsStatus ns = natsSubscription_FetchRequest(&list, sub_, &req);
  if (ns == NATS_TIMEOUT || ns == NATS_NOT_FOUND) return std::unique_ptr<Delivery>();
  if (ns != NATS_OK) return conn_.error(ns, "broker: fetching from consumer " + consumer_name(task_));
  std::unique_ptr<Delivery> d;
  for (int i = 0; i < list.Count; ++i) {
    if (!d) {
      d = std::make_unique<Delivery>(list.Msgs[i], conn_);
      list.Msgs[i] = nullptr;
    }
  }
  natsMsgList_Destroy(&list);
  return d;
}

}  // namespace revis::broker
