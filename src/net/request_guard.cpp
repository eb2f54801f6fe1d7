#include "net/request_guard.h"

#include <arpa/inet.h>

#include <algorithm>
#include <optional>

namespace revis::node {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The name part of "name", "name:port" or "[v6]:port", lower case, without
// a trailing dot; none when the text is not of that form (or holds a byte
// outside printable ASCII, which no name has).
std::optional<std::string> host_name(std::string_view host) {
  if (!std::all_of(host.begin(), host.end(), [](unsigned char c) { return c > 0x20 && c < 0x7f; })) return std::nullopt;
  std::string_view name = host, port;
  if (host.starts_with('[')) {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    name = host.substr(0, close + 1);
    std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) return std::nullopt;
    if (!rest.empty()) port = rest.substr(1);
    if (!rest.empty() && port.empty()) return std::nullopt;
  } else if (const size_t colon = host.find(':'); colon != std::string_view::npos) {
    name = host.substr(0, colon);
    port = host.substr(colon + 1);
    if (port.empty()) return std::nullopt;
  }
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  if (name.ends_with('.')) name.remove_suffix(1);
  if (name.empty()) return std::nullopt;
  return lower(name);
}

bool ip_literal(const std::string& name) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, name.c_str(), &v4) == 1) return true;
  return name.size() > 2 && name.front() == '[' && name.back() == ']' &&
         inet_pton(AF_INET6, name.substr(1, name.size() - 2).c_str(), &v6) == 1;
}

bool wildcard_address(const std::string& host) { return host == "0.0.0.0" || host == "::" || host == "[::]"; }

}  // namespace

RequestGuard::RequestGuard(const NodeConfig& config, std::string machine_name) {
  any_host_ = !config.token.empty();
  for (const std::string& name : {config.name, machine_name}) {
    if (name.empty()) continue;
    names_.push_back(lower(name));
    names_.push_back(lower(name) + ".local");
  }
  if (!wildcard_address(config.host))
    if (auto name = host_name(config.host.find(':') != std::string::npos && !config.host.starts_with('[')
                                  ? "[" + config.host + "]"  // a bare IPv6 listen address
                                  : config.host))
      names_.push_back(*name);
  for (const std::string& entry : config.allow_hosts) {
    if (entry == "*") any_host_ = true;
    else if (auto name = host_name(entry)) names_.push_back(*name);
  }
  for (const std::string& entry : config.allow_origins) {
    if (entry == "*") any_origin_ = true;
    std::string origin = lower(entry);
    while (origin.ends_with('/')) origin.pop_back();
    origins_.push_back(origin);
  }
}

bool RequestGuard::host_allowed(std::string_view host) const {
  if (host.empty() || any_host_) return true;
  const std::optional<std::string> name = host_name(host);
  if (!name) return false;
  if (ip_literal(*name) || *name == "localhost" || name->ends_with(".localhost")) return true;
  return std::find(names_.begin(), names_.end(), *name) != names_.end();
}

RequestGuard::Origin RequestGuard::classify_origin(std::string_view origin, std::string_view host) const {
  if (origin.empty()) return Origin::kNone;
  const std::string o = lower(origin);
  for (std::string_view scheme : {"http://", "https://"})
    if (o.starts_with(scheme) && !host.empty() && o.substr(scheme.size()) == lower(host)) return Origin::kSame;
  if (any_origin_ || std::find(origins_.begin(), origins_.end(), o) != origins_.end()) return Origin::kAllowed;
  return Origin::kForeign;
}

}  // namespace revis::node
