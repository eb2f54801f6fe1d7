// Which Host and Origin headers the node answers: its defence against web
// pages that call a node through the user's browser (docs/protocol.md,
// "Browsers").
//
// Host (DNS rebinding). A page on evil.example can make its own name
// resolve to 127.0.0.1 and then talk to a loopback node as if it were
// same-origin; the browser still sends "Host: evil.example". A node
// without a token therefore answers only Hosts it knows: IP literals (a
// page can only get one by being loaded from that address), localhost and
// *.localhost, the node's name and the machine's host name (also with
// ".local"), the listen address, and --allow-host entries ("*": any). A
// node with a token answers any Host: a rebound page does not know the
// token.
//
// Origin (cross-site requests). Browsers send Origin on cross-site
// requests and WebSocket upgrades; other clients send none. A request
// without Origin passes; one with an Origin passes when the Origin names
// the same host and port as the request's Host (the node's own pages, or a
// proxy in front of it), or is in --allow-origin ("*": any). Allowed
// cross-site origins get CORS headers from the server.
//
// Hosts and origins compare without case and without a trailing dot.
// Thread-safety: immutable after construction.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "node/config.h"

namespace revis::node {

class RequestGuard {
 public:
  // `machine_name`: this machine's host name (gethostname).
  RequestGuard(const NodeConfig& config, std::string machine_name);

  // `host`: the Host header's value ("name", "name:port", "[v6]:port"),
  // empty when the request has none (the server requires one of HTTP/1.1).
  bool host_allowed(std::string_view host) const;

  enum class Origin {
    kNone,     // no Origin header: not a browser's cross-site request
    kSame,     // the Origin is this node as the request addressed it
    kAllowed,  // a cross-site origin the operator allowed: answer with CORS headers
    kForeign,  // refuse
  };
  Origin classify_origin(std::string_view origin, std::string_view host) const;

 private:
  bool any_host_ = false, any_origin_ = false;
  std::vector<std::string> names_;    // lower case, no trailing dot
  std::vector<std::string> origins_;  // lower case, no trailing slash
};

}  // namespace revis::node
