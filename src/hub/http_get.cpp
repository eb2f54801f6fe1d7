#include "hub/http_get.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <limits>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace revis::hub {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

constexpr int kMaxRedirects = 10;
constexpr size_t kErrorBodyLimit = 64 * 1024;

// Runs one asynchronous operation to its end on `ioc`: the streams' own
// expiry (beast::tcp_stream::expires_after) bounds it.
template <class Start>
beast::error_code run_op(net::io_context& ioc, Start&& start) {
  beast::error_code result;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run();
  return result;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// What OpenSSL found wrong with the certificate, when that is why the
// handshake failed.
std::string tls_reason(SSL* ssl, const beast::error_code& ec) {
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) return std::string("certificate not trusted: ") + X509_verify_cert_error_string(verify);
  return ec.message();
}

// One request/answer exchange on a connected stream. Redirect answers
// return with their Location and no body read.
template <class Stream>
Result<GetResult> exchange(net::io_context& ioc, Stream& stream, beast::tcp_stream& lower_layer, const Url& url,
                           const std::vector<std::pair<std::string, std::string>>& headers, int timeout_ms,
                           std::map<std::string, std::string>& chain, const HeadSink& on_head, const BodySink& on_body) {
  http::request<http::empty_body> req{http::verb::get, url.target, 11};
  req.set(http::field::host, url.host);
  req.set(http::field::user_agent, "revis");
  req.set(http::field::connection, "close");
  for (const auto& [name, value] : headers) req.set(name, value);
  lower_layer.expires_after(std::chrono::milliseconds(timeout_ms));
  if (auto ec = run_op(ioc, [&](auto handler) { http::async_write(stream, req, handler); }))
    return Status::error("sending the request to " + url.origin() + " failed: " + ec.message());

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<uint64_t>::max());
  lower_layer.expires_after(std::chrono::milliseconds(timeout_ms));
  if (auto ec = run_op(ioc, [&](auto handler) { http::async_read_header(stream, buffer, parser, handler); }))
    return Status::error("reading the answer of " + url.origin() + " failed: " + ec.message());
  GetResult out;
  out.status = parser.get().result_int();
  for (const auto& field : parser.get()) out.headers[lower(std::string(field.name_string()))] = std::string(field.value());
  for (const auto& [name, value] : out.headers) chain.emplace(name, value);
  if (out.status >= 300 && out.status < 400) return out;

  const bool ok = out.status >= 200 && out.status < 300;
  out.chain_headers = chain;
  if (ok && on_head) {
    if (Status s = on_head(out); !s.ok()) return s;
  }
  std::vector<char> chunk(1 << 16);
  uint64_t received = 0;
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    lower_layer.expires_after(std::chrono::milliseconds(timeout_ms));
    beast::error_code ec = run_op(ioc, [&](auto handler) { http::async_read(stream, buffer, parser, handler); });
    if (ec == http::error::need_buffer) ec = {};
    const size_t n = chunk.size() - parser.get().body().size;
    received += n;
    if (ok && n > 0) {
      if (Status s = on_body(chunk.data(), n); !s.ok()) return s;
    } else if (!ok && out.error_body.size() < kErrorBodyLimit) {
      out.error_body.append(chunk.data(), std::min(n, kErrorBodyLimit - out.error_body.size()));
    }
    if (ec) {
      return Status::error("connection lost: " + url.origin() + " closed after " + std::to_string(received) +
                           " bytes of the answer (" + ec.message() + ")");
    }
  }
  return out;
}

Result<GetResult> fetch_once(const Url& url, const std::vector<std::pair<std::string, std::string>>& headers,
                             int timeout_ms, std::map<std::string, std::string>& chain, const HeadSink& on_head,
                             const BodySink& on_body) {
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  tcp::resolver::results_type endpoints;
  beast::error_code ec = run_op(ioc, [&](auto handler) {
    resolver.async_resolve(url.host, url.port, [&endpoints, handler](beast::error_code e, tcp::resolver::results_type r) mutable {
      endpoints = std::move(r);
      handler(e);
    });
  });
  if (ec) return Status::error("cannot resolve " + url.host + ": " + ec.message() + " (network down?)");
  auto connect = [&](beast::tcp_stream& s) -> Status {
    s.expires_after(std::chrono::milliseconds(timeout_ms));
    if (auto e = run_op(ioc, [&](auto handler) { s.async_connect(endpoints, handler); }))
      return Status::error("connecting to " + url.origin() + " failed: " + e.message());
    return Status();
  };
  if (!url.tls) {
    beast::tcp_stream stream(ioc);
    if (Status s = connect(stream); !s.ok()) return s;
    return exchange(ioc, stream, stream, url, headers, timeout_ms, chain, on_head, on_body);
  }
  ssl::context ctx(ssl::context::tls_client);
  ctx.set_default_verify_paths();
  ctx.set_verify_mode(ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
  // SNI, and the name the certificate must carry.
  if (!SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str()) || !SSL_set1_host(stream.native_handle(), url.host.c_str()))
    return Status::error("TLS setup for " + url.host + " failed");
  if (Status s = connect(beast::get_lowest_layer(stream)); !s.ok()) return s;
  beast::get_lowest_layer(stream).expires_after(std::chrono::milliseconds(timeout_ms));
  if (auto e = run_op(ioc, [&](auto handler) { stream.async_handshake(ssl::stream_base::client, handler); }))
    return Status::error("TLS handshake with " + url.origin() + " failed: " + tls_reason(stream.native_handle(), e));
  return exchange(ioc, stream, beast::get_lowest_layer(stream), url, headers, timeout_ms, chain, on_head, on_body);
}

}  // namespace

std::string Url::origin() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return std::string(tls ? "https://" : "http://") + (ipv6 ? "[" + host + "]" : host) + ":" + port;
}

Result<Url> parse_url(const std::string& text) {
  Url url;
  size_t rest;
  if (text.rfind("https://", 0) == 0) {
    url.tls = true;
    rest = 8;
  } else if (text.rfind("http://", 0) == 0) {
    rest = 7;
  } else {
    return Status::error("\"" + text + "\": expected an http:// or https:// URL");
  }
  const size_t path = std::min(text.find('/', rest), text.size());
  std::string authority = text.substr(rest, path - rest);
  url.target = path < text.size() ? text.substr(path) : "/";
  if (authority.find('@') != std::string::npos) return Status::error("\"" + text + "\": user names in URLs are not supported");
  size_t port_colon = std::string::npos;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) return Status::error("\"" + text + "\": unclosed [ in the host");
    url.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return Status::error("\"" + text + "\": expected :PORT after ]");
      port_colon = close + 1;
    }
  } else {
    port_colon = authority.find(':');
    url.host = authority.substr(0, port_colon);
  }
  url.port = port_colon == std::string::npos ? (url.tls ? "443" : "80") : authority.substr(port_colon + 1);
  if (url.host.empty()) return Status::error("\"" + text + "\": no host");
  if (url.port.empty() || !std::all_of(url.port.begin(), url.port.end(), [](unsigned char c) { return std::isdigit(c); }))
    return Status::error("\"" + text + "\": the port is not a number");
  return url;
}

Result<GetResult> http_get(const std::string& url_text, const GetOptions& options, const HeadSink& on_head,
                           const BodySink& on_body) {
  auto first = parse_url(url_text);
  if (!first.ok()) return first.status();
  Url url = *first;
  std::map<std::string, std::string> chain;
  for (int hop = 0; hop <= kMaxRedirects; ++hop) {
    auto headers = options.headers;
    if (!options.bearer.empty() && url.origin() == first->origin()) headers.emplace_back("Authorization", "Bearer " + options.bearer);
    auto answer = fetch_once(url, headers, options.timeout_ms, chain, on_head, on_body);
    if (!answer.ok()) return answer.status();
    const int status = answer->status;
    if (status != 301 && status != 302 && status != 303 && status != 307 && status != 308) {
      answer->chain_headers = chain;
      return answer;
    }
    const auto location = answer->headers.find("location");
    if (location == answer->headers.end() || location->second.empty())
      return Status::error(url.origin() + url.target + ": redirect " + std::to_string(status) + " without a Location");
    std::string to = location->second;
    if (to.rfind("//", 0) == 0) to = (url.tls ? "https:" : "http:") + to;  // same scheme, another host
    if (to.rfind("http://", 0) == 0 || to.rfind("https://", 0) == 0) {
      auto next = parse_url(to);
      if (!next.ok()) return next.status().with_context("redirect from " + url.origin() + url.target);
      // Never from https down to http: the signed URL and the bytes would travel in clear.
      if (url.tls && !next->tls) return Status::error("redirect from " + url.origin() + " to plain http refused: " + to);
      url = *next;
    } else if (!to.empty() && to.front() == '/') {
      url.target = to;
    } else {
      return Status::error(url.origin() + url.target + ": unsupported redirect Location \"" + to + "\"");
    }
  }
  return Status::error(url_text + ": more than " + std::to_string(kMaxRedirects) + " redirects");
}

Result<TextResult> http_get_text(const std::string& url, const GetOptions& options, size_t limit) {
  TextResult out;
  auto answer = http_get(url, options, nullptr, [&](const char* data, size_t size) -> Status {
    if (out.body.size() + size > limit) return Status::error(url + ": the answer is larger than " + std::to_string(limit) + " bytes");
    out.body.append(data, size);
    return Status();
  });
  if (!answer.ok()) return answer.status();
  out.response = std::move(*answer);
  return out;
}

Status answer_error(int status, const std::string& what, bool token_sent) {
  if (status == 401 || status == 403)
    return Status::error(what + ": HTTP " + std::to_string(status) + ": the hub refused it: the repository is gated or private, or does not exist; " +
                         (token_sent ? "the token in HF_TOKEN may not read it (accept its terms on the hub, or use another token)"
                                     : "set HF_TOKEN to a Hugging Face access token that may read it"));
  if (status == 404) return Status::error(what + ": HTTP 404: no such repository or file on the hub (check ORG/REPO and the file name)");
  return Status::error(what + ": HTTP " + std::to_string(status));
}

}  // namespace revis::hub
