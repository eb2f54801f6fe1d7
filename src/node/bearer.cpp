#include "node/bearer.h"

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

}  // namespace revis::node
