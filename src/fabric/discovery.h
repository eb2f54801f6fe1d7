// LAN discovery of revis nodes with mDNS/DNS-SD, through avahi-daemon
// (avahi-client). A Discovery advertises this node as a `_revis._tcp`
// service with the TXT records name=, instance=, tiers= (comma-separated)
// and catalog=, and browses for the other `_revis._tcp` services: each one
// is resolved (its IPv4 address) and reported once as found, and as lost
// when its last record is withdrawn. Found and lost say what mDNS saw, not
// whether the node is alive: that is the peer link's heartbeat's job.
//
// The service is published where this node listens: on every interface for
// a wildcard address, on the loopback interface for a loopback one, on the
// interface holding the address otherwise, so that the address a browser
// resolves is one the node accepts connections on.
//
// When avahi-daemon is not running, or not even the system D-Bus is, the
// node says so once and keeps trying until it is; when the daemon restarts,
// every service is reported lost and found again.
//
// Thread-safety: the events run on Avahi's own thread, one at a time; they
// must not block on anything that may wait for a Discovery call. Destroying
// the Discovery withdraws the advertisement and stops that thread; no event
// runs after the destructor returns.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "revis/status.h"

namespace revis::fabric {

// What this node advertises.
struct Advertisement {
  std::string name;      // the service name (Avahi picks "NAME #2" on a collision)
  std::string instance;  // the dispatcher's instance id: lets a node recognise itself
  std::string catalog;   // catalogue digest
  std::vector<std::string> tiers;
  std::string host;  // the listen address, which decides the interfaces
  int port = 0;
};

// A service found on the LAN, from its SRV, A and TXT records.
struct DiscoveredNode {
  std::string service;  // the DNS-SD service name, unique on the LAN
  std::string address;  // IPv4, dotted
  int port = 0;
  std::string name, instance, catalog;
  std::vector<std::string> tiers;
};

struct DiscoveryEvents {
  std::function<void(const DiscoveredNode& node)> on_found;
  std::function<void(const std::string& service)> on_lost;
};

class Discovery {
 public:
  // Ok when this build can discover (it was built with avahi-client); else
  // the error to show for --discover.
  static Status available();
  // Connects to avahi-daemon on a thread of its own, then advertises and
  // browses. Fails only when mDNS cannot be used at all (not built in, no
  // event loop); a daemon or D-Bus that is not running yet is waited for.
  static Result<std::unique_ptr<Discovery>> start(const Advertisement& self, DiscoveryEvents events);
  ~Discovery();
  Discovery(const Discovery&) = delete;
  Discovery& operator=(const Discovery&) = delete;

  struct Impl;

 private:
  explicit Discovery(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace revis::fabric
