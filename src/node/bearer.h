// The node's one credential: a bearer token (RFC 6750) that every HTTP
// request and WebSocket upgrade must present when the node has one.
//
// valid_token() is what a configured token may be: visible ASCII without
// spaces, so that it travels unchanged in an Authorization header.
// bearer_matches() checks a request's Authorization header against it: the
// scheme name matched without regard to case (RFC 7235 section 2.1), then
// the credential compared in time that does not depend on where it differs.
//
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "revis/status.h"

namespace revis::node {

Status valid_token(std::string_view token);
bool bearer_matches(std::string_view authorization, std::string_view token);

}  // namespace revis::node
