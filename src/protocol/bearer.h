// The node's one credential: a bearer token (RFC 6750) that every HTTP
// request and WebSocket upgrade must present when the node has one
// (docs/protocol.md). The server (net/) checks requests with it; the config
// (node/) checks the configured token.
//
// valid_token() is what a configured token may be: visible ASCII without
// spaces, so that it travels unchanged in an Authorization header.
// bearer_matches() checks a request's Authorization header against it: the
// scheme name matched without regard to case (RFC 7235 section 2.1), then
// the credential compared in time that does not depend on where it differs.
// api_key_matches() does the same for an x-api-key header, which holds the
// token alone.
//
// A browser's WebSocket cannot set Authorization; the dashboard (web/)
// offers the subprotocols "revis" and "revis.token.HEX" instead, HEX being
// the token's bytes in lower-case hex. subprotocol_matches() checks those
// (the same constant-time comparison); the server then selects "revis" in
// its answer, as browsers require of a subprotocol they offered.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "revis/status.h"

namespace revis::node {

Status valid_token(std::string_view token);
bool bearer_matches(std::string_view authorization, std::string_view token);
// Anthropic's clients send the token alone in an x-api-key header.
bool api_key_matches(std::string_view x_api_key, std::string_view token);

inline constexpr std::string_view kDashboardSubprotocol = "revis";
// `header`: a Sec-WebSocket-Protocol value (comma-separated names).
bool subprotocol_matches(std::string_view header, std::string_view token);
// The token "revis.token.HEX" in `header` carries; none when there is no
// such name or it is malformed.
std::optional<std::string> token_from_subprotocols(std::string_view header);
bool offers_subprotocol(std::string_view header, std::string_view name);

}  // namespace revis::node
