#include "protocol/bearer.h"

#include <cctype>

namespace revis::node {
namespace {

// A comparison whose time does not depend on where the strings differ, so
// the token cannot be guessed byte by byte from response times.
bool equal_constant_time(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) diff |= static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

// Calls `each` with every comma-separated name of `header`, trimmed;
// stops when it returns true.
template <class Each>
bool any_subprotocol(std::string_view header, Each each) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view name = header.substr(0, comma);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    if (each(name)) return true;
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return false;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

Status valid_token(std::string_view token) {
  if (token.empty()) return Status::error("token is empty");
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c <= 0x20 || c >= 0x7f)
      return Status::error("token: byte " + std::to_string(i) +
                           " is a space, a control character or not ASCII (expected visible ASCII characters only)");
  }
  return {};
}

bool bearer_matches(std::string_view authorization, std::string_view token) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return false;
  std::string_view credential = authorization.substr(kScheme.size());
  if (credential.front() != ' ') return false;
  while (!credential.empty() && credential.front() == ' ') credential.remove_prefix(1);
  return equal_constant_time(credential, token);
}

bool api_key_matches(std::string_view x_api_key, std::string_view token) {
  return !x_api_key.empty() && equal_constant_time(x_api_key, token);
}

std::optional<std::string> token_from_subprotocols(std::string_view header) {
  constexpr std::string_view kPrefix = "revis.token.";
  std::optional<std::string> token;
  any_subprotocol(header, [&](std::string_view name) {
    if (!name.starts_with(kPrefix)) return false;
    const std::string_view hex = name.substr(kPrefix.size());
    if (hex.empty() || hex.size() % 2 != 0) return false;
    std::string bytes;
    for (size_t i = 0; i < hex.size(); i += 2) {
      const int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
      if (hi < 0 || lo < 0) return false;
      bytes.push_back(static_cast<char>(hi * 16 + lo));
    }
    token = std::move(bytes);
    return true;
  });
  return token;
}

bool offers_subprotocol(std::string_view header, std::string_view name) {
  return any_subprotocol(header, [&](std::string_view offered) { return offered == name; });
}


bool subprotocol_matches(std::string_view header, std::string_view token) {
  const std::optional<std::string> offered = token_from_subprotocols(header);
  return offered && equal_constant_time(*offered, token);
}

}  // namespace revis::node
