// A link to one peer: a WebSocket connection to its /v1/revis/stream that
// subscribes to its state (the first message sent is `hello`) and carries
// the tickets forwarded to it. The link reconnects by itself (with backoff)
// and declares the connection dead when nothing has arrived for the
// heartbeat timeout: a peer pushes its state at least every heartbeat, so
// silence means the peer or the network is gone.
//
// Each successful connection is a new session (a number); events name it,
// so the dispatcher can tell a late message of a dead connection from the
// current one.
//
// Thread-safety: the events run on the io_context's thread; send() and
// stop() may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/client.h"

namespace boost::asio {
class io_context;
}

namespace revis::fabric {

struct PeerLinkEvents {
  std::function<void(uint64_t session)> on_up;
  std::function<void(uint64_t session, std::string text)> on_message;
  // The session ended (closed, refused, silent too long). Delivered once per
  // session, and again for a send() on a session that is over.
  std::function<void(uint64_t session, const std::string& why)> on_down;
};

class PeerLink {
 public:
  PeerLink(boost::asio::io_context& io, node::HostPort peer, std::string token, std::string hello,
           std::chrono::milliseconds heartbeat_timeout, PeerLinkEvents events);
  ~PeerLink();
  PeerLink(const PeerLink&) = delete;
  PeerLink& operator=(const PeerLink&) = delete;

  void start();
  // Sends on `session`; if that session is over, on_down(session) runs
  // instead, so a message is never silently lost.
  void send(uint64_t session, std::string text);
  // Closes the connection; no more events. Returns at once.
  void stop();

  const node::HostPort& peer() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace revis::fabric
