// One HTTP GET over http:// or https://, streamed, following redirects: the
// transport of the hub client. Beast and OpenSSL stay inside http_get.cpp.
//
// Contract:
//  - https:// verifies the server's certificate chain against the system's
//    CA store (ca-certificates; OpenSSL's default paths, which also honour
//    SSL_CERT_FILE and SSL_CERT_DIR) and its host name; a failure is an
//    error naming the host and OpenSSL's reason. No way to turn it off.
//  - Up to 10 redirects (301, 302, 303, 307, 308), absolute or relative.
//    `bearer` goes only to the scheme, host and port of the first URL (the
//    hub answers 302 to a CDN on another host, whose URL is signed).
//  - The body of the final 2xx answer goes to on_body in chunks; an error
//    from on_body stops the transfer and is returned. A non-2xx answer's
//    body (its first 64 KiB) is kept in GetResult::error_body.
//  - Every connect, handshake, write and read has `timeout_ms`; a
//    connection lost before the body is complete is an error ("connection
//    lost"), after which on_body has seen what arrived.
//
// Thread-safety: plain functions; each call has its own connection.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "revis/status.h"

namespace revis::hub {

struct Url {
  bool tls = false;
  std::string host;  // without brackets for IPv6
  std::string port;  // "443", "80" or the one given
  std::string target;  // "/path?query"
  std::string origin() const;  // "https://host:port"
};
Result<Url> parse_url(const std::string& text);

struct GetOptions {
  // {} on each field: designated initializers may leave any of them out.
  std::vector<std::pair<std::string, std::string>> headers{};  // sent on every hop (Range)
  std::string bearer{};  // "Authorization: Bearer ..." to the first URL's origin only
  int timeout_ms = 30000;
};

struct GetResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // the final answer's, names in lower case
  // Every hop's header of that name, first one first: the hub puts
  // X-Linked-Etag on its own 302, not on the CDN's answer.
  std::map<std::string, std::string> chain_headers;
  std::string error_body;
};

using BodySink = std::function<Status(const char* data, size_t size)>;
// Called with the final 2xx answer's status and headers (chain_headers
// filled in) before its body; an error stops the transfer and is returned.
using HeadSink = std::function<Status(const GetResult& head)>;

Result<GetResult> http_get(const std::string& url, const GetOptions& options, const HeadSink& on_head,
                           const BodySink& on_body);

// The error for a non-2xx answer of the hub to a request for `what`:
// 401/403 say that the repository is gated or private and how HF_TOKEN
// helps (`token_sent`: whether one was), 404 that it does not exist.
Status answer_error(int status, const std::string& what, bool token_sent);

// A small answer (JSON) whole: http_get with the body collected up to
// `limit` bytes (more is an error).
struct TextResult {
  GetResult response;
  std::string body;
};
Result<TextResult> http_get_text(const std::string& url, const GetOptions& options, size_t limit);

}  // namespace revis::hub
