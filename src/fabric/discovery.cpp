#include "fabric/discovery.h"

#ifdef REVIS_HAVE_AVAHI

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <map>
#include <set>
#include <utility>

#include <avahi-client/client.h>
#include <avahi-client/lookup.h>
#include <avahi-client/publish.h>
#include <avahi-common/alternative.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/thread-watch.h>
#include <avahi-common/timeval.h>

#include "base/log.h"
#include "node/config.h"

namespace revis::fabric {
namespace {

constexpr const char* kServiceType = "_revis._tcp";
// After the daemon went away: how long before connecting again (the client
// then waits for the daemon to reappear by itself).
constexpr unsigned kReconnectMs = 1000;
// A TXT string holds at most 255 bytes, "tiers=" included.
constexpr size_t kMaxTxtValue = 255 - 6;

// The message for every way of failing to reach avahi-daemon.
std::string no_daemon(int avahi_error) {
  return std::string("mDNS discovery off: cannot reach avahi-daemon (") + avahi_strerror(avahi_error) +
         "): is it running?";
}

// See the header: the interface whose address a browser will resolve must
// be one the node accepts connections on.
AvahiIfIndex interface_for(const std::string& host) {
  const bool loopback = node::is_loopback_host(host);
  in_addr wanted{};
  if (!loopback && (inet_pton(AF_INET, host.c_str(), &wanted) != 1 || wanted.s_addr == htonl(INADDR_ANY)))
    return AVAHI_IF_UNSPEC;  // a wildcard or a host name: every interface
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return AVAHI_IF_UNSPEC;
  AvahiIfIndex found = AVAHI_IF_UNSPEC;
  for (const ifaddrs* a = list; a && found == AVAHI_IF_UNSPEC; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    const in_addr have = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr;
    if (loopback ? (a->ifa_flags & IFF_LOOPBACK) != 0 : have.s_addr == wanted.s_addr)
      found = static_cast<AvahiIfIndex>(if_nametoindex(a->ifa_name));
  }
  freeifaddrs(list);
  return found == 0 ? AVAHI_IF_UNSPEC : found;
}

std::string join_tiers(const std::vector<std::string>& tiers) {
  std::string out;
  for (const std::string& t : tiers) {
    // Informational (a peer learns the tiers from the node's state on its
    // link), so a list too long for one TXT string is cut at a tier.
    if (out.size() + (out.empty() ? 0 : 1) + t.size() > kMaxTxtValue) break;
    out += (out.empty() ? "" : ",") + t;
  }
  return out;
}

std::vector<std::string> split_tiers(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

void read_txt(AvahiStringList* txt, DiscoveredNode& node) {
  for (AvahiStringList* l = txt; l; l = avahi_string_list_get_next(l)) {
    char *key = nullptr, *value = nullptr;
    if (avahi_string_list_get_pair(l, &key, &value, nullptr) != 0) continue;
    const std::string k = key, v = value ? value : "";
    avahi_free(key);
    avahi_free(value);
    if (k == "name") node.name = v;
    else if (k == "instance") node.instance = v;
    else if (k == "catalog") node.catalog = v;
    else if (k == "tiers") node.tiers = split_tiers(v);
  }
}

}  // namespace

// Everything below runs on Avahi's thread, except start() and the
// destructor, which run before that thread starts and after it stopped.
struct Discovery::Impl {
  Advertisement self;
  DiscoveryEvents events;
  AvahiIfIndex interface = AVAHI_IF_UNSPEC;
  std::string service_name;  // self.name, or Avahi's alternative after a collision
  AvahiThreadedPoll* poll = nullptr;
  AvahiClient* client = nullptr;
  AvahiEntryGroup* group = nullptr;
  AvahiServiceBrowser* browser = nullptr;
  AvahiTimeout* reconnect = nullptr;
  bool said_waiting = false;      // the daemon is not running (D-Bus is)
  bool said_unreachable = false;  // not even D-Bus answers
  // Services by name: the records (interface, protocol) that name them now,
  // and whether on_found was called. A node on two interfaces is one node.
  struct Seen {
    std::set<std::pair<AvahiIfIndex, AvahiProtocol>> records;
    bool reported = false;
  };
  std::map<std::string, Seen> services;

  ~Impl() {
    if (poll) avahi_threaded_poll_stop(poll);
    if (reconnect) avahi_threaded_poll_get(poll)->timeout_free(reconnect);
    // Frees the group (withdrawing the service), the browser and any
    // resolver still running.
    if (client) avahi_client_free(client);
    if (poll) avahi_threaded_poll_free(poll);
  }

  int connect() {
    int error = 0;
    client = avahi_client_new(avahi_threaded_poll_get(poll), AVAHI_CLIENT_NO_FAIL, on_client, this, &error);
    return client ? AVAHI_OK : error;
  }

  static void on_client(AvahiClient* c, AvahiClientState state, void* data) {
    auto* self = static_cast<Impl*>(data);
    switch (state) {
      case AVAHI_CLIENT_S_RUNNING:
        self->said_waiting = false;
        self->said_unreachable = false;
        self->advertise(c);
        self->browse(c);
        break;
      case AVAHI_CLIENT_S_COLLISION:
      case AVAHI_CLIENT_S_REGISTERING:
        // The daemon is choosing a new host name: records published now
        // would name the old one. They are added again once it runs.
        if (self->group) avahi_entry_group_reset(self->group);
        break;
      case AVAHI_CLIENT_CONNECTING:
        if (!self->said_waiting && !self->said_unreachable)
          revis::log_line("warn", no_daemon(AVAHI_ERR_NO_DAEMON) +
                                     " This node keeps its --peer list and starts discovery when the daemon appears");
        self->said_waiting = true;
        break;
      case AVAHI_CLIENT_FAILURE:
        self->on_failure(c);
        break;
    }
  }

  // The daemon went away (or D-Bus did): the client and everything it made
  // are dead. Every service is lost as far as this node can tell; the
  // client is replaced once this callback is over.
  void on_failure(AvahiClient* c) {
    const int error = avahi_client_errno(c);
    revis::log_line("warn", std::string("mDNS: lost avahi-daemon (") + avahi_strerror(error) + "); connecting again");
    group = nullptr;  // freed with the client
    browser = nullptr;
    for (auto& [name, seen] : services)
      if (seen.reported && events.on_lost) events.on_lost(name);
    services.clear();
    schedule_reconnect();
  }

  void schedule_reconnect() {
    timeval when{};
    avahi_elapse_time(&when, kReconnectMs, 0);
    const AvahiPoll* api = avahi_threaded_poll_get(poll);
    if (reconnect) api->timeout_update(reconnect, &when);
    else reconnect = api->timeout_new(api, &when, on_reconnect, this);
  }

  static void on_reconnect(AvahiTimeout*, void* data) {
    static_cast<Impl*>(data)->reconnect_now();
  }

  // Replaces the client. avahi_client_new fails at once, rather than wait,
  // when not even the system D-Bus answers: then it is tried again every
  // kReconnectMs, and said once until the daemon is reached.
  void reconnect_now() {
    if (client) avahi_client_free(client);
    client = nullptr;
    if (int error = connect(); error != AVAHI_OK) {
      if (!said_unreachable)
        revis::log_line("warn", no_daemon(error) + " Trying again every " + std::to_string(kReconnectMs) +
                                   " ms; this node keeps its --peer list meanwhile");
      said_unreachable = true;
      schedule_reconnect();
    }
  }

  // ---------------------------------------------------------------- publishing

  void advertise(AvahiClient* c) {
    if (!group) group = avahi_entry_group_new(c, on_group, this);
    if (!group) {
      revis::log_line("warn", std::string("mDNS: cannot advertise this node: ") + avahi_strerror(avahi_client_errno(c)));
      return;
    }
    if (!avahi_entry_group_is_empty(group)) return;
    AvahiStringList* txt = avahi_string_list_new(("name=" + self.name).c_str(), ("instance=" + self.instance).c_str(),
                                                 ("tiers=" + join_tiers(self.tiers)).c_str(),
                                                 ("catalog=" + self.catalog).c_str(), nullptr);
    int error = avahi_entry_group_add_service_strlst(group, interface, AVAHI_PROTO_INET, AvahiPublishFlags(0),
                                                     service_name.c_str(), kServiceType, nullptr, nullptr,
                                                     static_cast<uint16_t>(self.port), txt);
    avahi_string_list_free(txt);
    if (error == AVAHI_ERR_COLLISION) return rename_and_advertise(c);
    if (error == AVAHI_OK) error = avahi_entry_group_commit(group);
    if (error != AVAHI_OK)
      revis::log_line("warn", "mDNS: cannot advertise this node as " + service_name + ": " + avahi_strerror(error));
  }

  // Another service on the LAN has our name: Avahi's next one ("a #2").
  void rename_and_advertise(AvahiClient* c) {
    char* other = avahi_alternative_service_name(service_name.c_str());
    revis::log_line("info", "mDNS: the service name " + service_name + " is taken; advertising as " + other);
    service_name = other;
    avahi_free(other);
    avahi_entry_group_reset(group);
    advertise(c);
  }

  static void on_group(AvahiEntryGroup* g, AvahiEntryGroupState state, void* data) {
    auto* self = static_cast<Impl*>(data);
    if (state == AVAHI_ENTRY_GROUP_ESTABLISHED) {
      revis::log_line("info", "mDNS: advertising this node as " + self->service_name + " (" + kServiceType + ", port " +
                                 std::to_string(self->self.port) + ")");
    } else if (state == AVAHI_ENTRY_GROUP_COLLISION) {
      self->rename_and_advertise(avahi_entry_group_get_client(g));
    } else if (state == AVAHI_ENTRY_GROUP_FAILURE) {
      revis::log_line("warn", "mDNS: advertising " + self->service_name + " failed: " +
                                 avahi_strerror(avahi_client_errno(avahi_entry_group_get_client(g))));
    }
  }

  // ---------------------------------------------------------------- browsing

  void browse(AvahiClient* c) {
    if (browser) return;
    browser = avahi_service_browser_new(c, AVAHI_IF_UNSPEC, AVAHI_PROTO_INET, kServiceType, nullptr, AvahiLookupFlags(0),
                                        on_browse, this);
    if (!browser)
      revis::log_line("warn", std::string("mDNS: cannot browse for ") + kServiceType + ": " +
                                 avahi_strerror(avahi_client_errno(c)));
  }

  static void on_browse(AvahiServiceBrowser* b, AvahiIfIndex interface, AvahiProtocol protocol, AvahiBrowserEvent event,
                        const char* name, const char* type, const char* domain, AvahiLookupResultFlags, void* data) {
    auto* self = static_cast<Impl*>(data);
    AvahiClient* c = avahi_service_browser_get_client(b);
    if (event == AVAHI_BROWSER_NEW) {
      self->services[name].records.insert({interface, protocol});
      // Freed in on_resolved, or with the client.
      if (!avahi_service_resolver_new(c, interface, protocol, name, type, domain, AVAHI_PROTO_INET, AvahiLookupFlags(0),
                                      on_resolved, self))
        revis::log_line("warn", std::string("mDNS: cannot resolve service ") + name + ": " +
                                   avahi_strerror(avahi_client_errno(c)));
    } else if (event == AVAHI_BROWSER_REMOVE) {
      auto it = self->services.find(name);
      if (it == self->services.end()) return;
      it->second.records.erase({interface, protocol});
      if (!it->second.records.empty()) return;
      const bool reported = it->second.reported;
      self->services.erase(it);
      if (reported && self->events.on_lost) self->events.on_lost(name);
    } else if (event == AVAHI_BROWSER_FAILURE) {
      revis::log_line("warn", std::string("mDNS: browsing for ") + kServiceType + " failed: " +
                                 avahi_strerror(avahi_client_errno(c)));
    }
  }

  static void on_resolved(AvahiServiceResolver* r, AvahiIfIndex interface, AvahiProtocol protocol,
                          AvahiResolverEvent event, const char* name, const char*, const char*, const char*,
                          const AvahiAddress* address, uint16_t port, AvahiStringList* txt, AvahiLookupResultFlags,
                          void* data) {
    auto* self = static_cast<Impl*>(data);
    auto it = self->services.find(name);
    // Reported once per service; a record withdrawn while it was being
    // resolved is not reported at all.
    const bool wanted = it != self->services.end() && !it->second.reported && it->second.records.count({interface, protocol});
    if (event == AVAHI_RESOLVER_FOUND && wanted) {
      DiscoveredNode node;
      node.service = name;
      char text[AVAHI_ADDRESS_STR_MAX];
      node.address = avahi_address_snprint(text, sizeof text, address);
      node.port = port;
      read_txt(txt, node);
      it->second.reported = true;
      if (self->events.on_found) self->events.on_found(node);
    } else if (event == AVAHI_RESOLVER_FAILURE && wanted) {
      revis::log_line("warn", std::string("mDNS: cannot resolve service ") + name + ": " +
                                 avahi_strerror(avahi_client_errno(avahi_service_resolver_get_client(r))));
    }
    avahi_service_resolver_free(r);
  }
};

Status Discovery::available() { return {}; }

Result<std::unique_ptr<Discovery>> Discovery::start(const Advertisement& self, DiscoveryEvents events) {
  auto impl = std::make_unique<Impl>();
  impl->self = self;
  impl->events = std::move(events);
  impl->interface = interface_for(self.host);
  impl->service_name = self.name;
  impl->poll = avahi_threaded_poll_new();
  if (!impl->poll) return Status::error("mDNS discovery off: cannot create Avahi's event loop (out of memory?)");
  // Before the poll thread runs, nothing else touches the client.
  impl->reconnect_now();
  if (avahi_threaded_poll_start(impl->poll) < 0)
    return Status::error("mDNS discovery off: cannot start Avahi's event loop thread");
  return std::unique_ptr<Discovery>(new Discovery(std::move(impl)));
}

}  // namespace revis::fabric

#else  // built without avahi-client

namespace revis::fabric {

struct Discovery::Impl {};

Status Discovery::available() {
  return Status::error("this build has no mDNS support (built without avahi-client)");
}

Result<std::unique_ptr<Discovery>> Discovery::start(const Advertisement&, DiscoveryEvents) { return available(); }

}  // namespace revis::fabric

#endif

namespace revis::fabric {

Discovery::Discovery(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Discovery::~Discovery() = default;

}  // namespace revis::fabric
