// Small blocking clients for a node: a WebSocket client for the ticket
// protocol (revis submit, tests) and a one-shot HTTP request. Every call has
// a timeout, so a dead node cannot hang the caller. Beast stays inside
// client.cpp.
//
// Thread-safety: a WsClient is used by one thread at a time.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "revis/status.h"

namespace revis::node {

struct HostPort {
  std::string host;
  int port = 0;
};

// "host:port", "[::1]:port", or "host" (default_port).
Result<HostPort> parse_host_port(const std::string& text, int default_port);

class WsClient {
 public:
  // Connects and upgrades to WebSocket at `target`; with a token, sends
  // "Authorization: Bearer <token>".
  static Result<std::unique_ptr<WsClient>> connect(const HostPort& node, const std::string& target,
                                                   const std::string& token, int timeout_ms);
  ~WsClient();

  Status send(std::string_view text);
  // The next text message. Errors: "timeout" (the connection stays usable
  // only if nothing was half-read; treat it as broken), "closed: ...".
  Result<std::string> receive(int timeout_ms);
  // Close handshake, then the TCP connection.
  void close();
  // Drops the TCP connection without a close handshake: a vanished client.
  void abort();

  struct Impl;

 private:
  explicit WsClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // de-chunked
};

Result<HttpResponse> http_request(const HostPort& node, const std::string& method, const std::string& target,
                                  const std::string& body, const std::vector<std::pair<std::string, std::string>>& headers,
                                  int timeout_ms);

}  // namespace revis::node
