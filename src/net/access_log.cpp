#include "net/access_log.h"

#include <cstdio>
#include <string>

#include "base/log.h"

namespace revis::node {
namespace {

constexpr size_t kMaxRouteBytes = 200;

// Client-chosen text as one log token: printable ASCII kept, anything else
// (spaces, control bytes, UTF-8) as \xNN, cut at kMaxRouteBytes.
std::string token(std::string_view text) {
  if (text.empty()) return "-";
  std::string out;
  for (unsigned char c : text.substr(0, kMaxRouteBytes)) {
    if (c > 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (text.size() > kMaxRouteBytes) out += "...";
  return out;
}

}  // namespace

void log_access(const AccessRecord& r) {
  char figures[64];
  std::snprintf(figures, sizeof figures, "%lluB %.1fms", static_cast<unsigned long long>(r.bytes), r.duration_ms);
  const std::string route(r.route.substr(0, kMaxRouteBytes));
  nlohmann::json fields = {{"client", r.client}, {"method", r.method}, {"route", route}, {"status", r.status},
                           {"bytes", r.bytes},   {"durationMs", r.duration_ms}};
  if (!r.ticket_id.empty()) fields["ticketID"] = r.ticket_id;
  log_record("info",
             "access " + token(r.client) + " " + token(r.method) + " " + token(r.route) + " " + token(r.status) + " " +
                 figures + " " + token(r.ticket_id),
             "access", fields);
}

}  // namespace revis::node
