// The node's access log: one line per HTTP request, per WebSocket ticket
// (when it ends) and per WebSocket upgrade, through log_record, so it goes
// where the rest of the log goes, at info, in its format. A line names the
// client address, method, route (the path without its query), status, bytes
// sent, duration and the ticket ID; never a ticket's text or a token.
//
//   access 127.0.0.1 POST /v1/chat/completions 200 1532B 84.2ms chatcmpl-9f3a...
//   access 127.0.0.1 TICKET /v1/revis/stream done 2210B 1203.5ms t-42
//
// With --log-format json the same facts are members of the line's object:
//   {"ts":...,"level":"info","msg":"access","client":"127.0.0.1","method":"TICKET",
//    "route":"/v1/revis/stream","status":"done","bytes":2210,"durationMs":1203.5,"ticketID":"t-42"}
//
// Thread-safety: as log_line.
#pragma once

#include <cstdint>
#include <string_view>

namespace revis::node {

struct AccessRecord {
  std::string_view client;     // the source address
  std::string_view method;     // HTTP method, or TICKET
  std::string_view route;      // what the client sent: escaped and cut short in the line
  std::string_view status;     // an HTTP status, or a ticket's outcome (done, or its error code)
  uint64_t bytes = 0;          // sent to the client
  double duration_ms = 0;      // from the request (or ticket) to its last byte
  std::string_view ticket_id;  // empty: none
};

void log_access(const AccessRecord& record);

}  // namespace revis::node
