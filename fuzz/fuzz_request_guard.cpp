// libFuzzer target for the Host and Origin checks (net/request_guard.h)
// and the WebSocket token subprotocol (protocol/bearer.h), which read headers
// any web page can make a browser send. The input is
// "HOST\nORIGIN". No input may crash them, and the answers must keep their
// promises: a Host that is refused stays refused with a port appended, and
// an Origin is "same" only when it names the request's Host. The whole
// input is also read as a Sec-WebSocket-Protocol header: a token found
// there must be spelled in it, in hex.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/request_guard.h"
#include "protocol/bearer.h"

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using revis::node::RequestGuard;
  static const RequestGuard guard = [] {
    revis::node::NodeConfig config;
    config.name = "node-a";
    config.allow_hosts = {"api.lan"};
    config.allow_origins = {"https://app.example"};
    return RequestGuard(config, "box");
  }();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t newline = text.find('\n');
  const std::string_view host = text.substr(0, newline);
  const std::string_view origin = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
  const bool allowed = guard.host_allowed(host);
  if (!allowed && host.find(':') == std::string_view::npos && guard.host_allowed(std::string(host) + ":8080"))
    __builtin_trap();
  if (guard.classify_origin(origin, host) == RequestGuard::Origin::kSame &&
      (host.empty() || origin.size() <= host.size() || !lower(origin).ends_with(lower(host))))
    __builtin_trap();
  if (const auto token = revis::node::token_from_subprotocols(text)) {
    std::string hex = "revis.token.";
    for (unsigned char c : *token) hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
    if (token->empty() || text.find(hex) == std::string_view::npos) __builtin_trap();
  }
  return 0;
}
