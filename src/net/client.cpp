#include "net/client.h"

#include <algorithm>
#include <cctype>
#include <chrono>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

namespace revis::node {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// Runs the io_context until the operation started before completes or the
// time is up. On timeout the pending operation is cancelled (its handler
// still runs, with operation_aborted) and false is returned.
bool run_with_timeout(net::io_context& ioc, tcp::socket& socket, bool& done, int timeout_ms) {
  ioc.restart();
  ioc.run_for(std::chrono::milliseconds(timeout_ms));
  if (done) return true;
  beast::error_code ignored;
  socket.cancel(ignored);
  ioc.restart();
  ioc.run();
  return false;
}

Result<tcp::resolver::results_type> resolve(net::io_context& ioc, const HostPort& node) {
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(node.host, std::to_string(node.port), ec);
  if (ec) return Status::error("cannot resolve " + node.host + ": " + ec.message());
  return results;
}

Status connect_socket(net::io_context& ioc, tcp::socket& socket, const HostPort& node, int timeout_ms) {
  auto endpoints = resolve(ioc, node);
  if (!endpoints.ok()) return endpoints.status();
  bool done = false;
  beast::error_code result;
  net::async_connect(socket, *endpoints, [&](beast::error_code ec, const tcp::endpoint&) {
    result = ec;
    done = true;
  });
  if (!run_with_timeout(ioc, socket, done, timeout_ms))
    return Status::error("timed out connecting to " + node.host + ":" + std::to_string(node.port));
  if (result) return Status::error("cannot connect to " + node.host + ":" + std::to_string(node.port) + ": " + result.message());
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // small messages go out at once
  return {};
}

}  // namespace

Result<HostPort> parse_host_port(const std::string& text, int default_port) {
  HostPort hp;
  std::string rest;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) return Status::error(text + ": missing ] in an IPv6 address");
    hp.host = text.substr(1, close - 1);
    rest = text.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') return Status::error(text + ": expected :PORT after ]");
    if (!rest.empty()) rest = rest.substr(1);
  } else {
    const size_t colon = text.rfind(':');
    hp.host = text.substr(0, colon);
    if (colon != std::string::npos) rest = text.substr(colon + 1);
  }
  if (hp.host.empty()) return Status::error("\"" + text + "\": expected HOST:PORT");
  hp.port = default_port;
  if (!rest.empty()) {
    if (rest.size() > 5 || !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(rest) > 65535 || std::stoi(rest) == 0)
      return Status::error("\"" + text + "\": the port must be 1..65535");
    hp.port = std::stoi(rest);
  }
  return hp;
}

struct WsClient::Impl {
  net::io_context ioc;
  websocket::stream<tcp::socket> ws{ioc};
  beast::flat_buffer buffer;
  bool broken = false;
};

WsClient::WsClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WsClient::~WsClient() { abort(); }

Result<std::unique_ptr<WsClient>> WsClient::connect(const HostPort& node, const std::string& target,
                                                    const std::string& token, int timeout_ms) {
  auto impl = std::make_unique<Impl>();
  if (Status s = connect_socket(impl->ioc, impl->ws.next_layer(), node, timeout_ms); !s.ok()) return s;
  impl->ws.set_option(websocket::stream_base::decorator([token](websocket::request_type& req) {
    req.set(http::field::user_agent, "revis-client");
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  }));
  impl->ws.read_message_max(64u << 20);
  bool done = false;
  beast::error_code result;
  websocket::response_type response;
  impl->ws.async_handshake(response, node.host + ":" + std::to_string(node.port), target, [&](beast::error_code ec) {
    result = ec;
    done = true;
  });
  if (!run_with_timeout(impl->ioc, impl->ws.next_layer(), done, timeout_ms))
    return Status::error("timed out in the WebSocket handshake");
  if (result) {
    std::string why = result.message();
    if (response.result_int() != 0 && response.result_int() != 101)
      why = "HTTP " + std::to_string(response.result_int()) + (response.body().empty() ? "" : ": " + response.body());
    return Status::error("WebSocket handshake with " + node.host + ":" + std::to_string(node.port) + target +
                         " failed: " + why);
  }
  return std::unique_ptr<WsClient>(new WsClient(std::move(impl)));
}

Status WsClient::send(std::string_view text) {
  if (impl_->broken) return Status::error("the connection is broken");
  impl_->ws.text(true);
  bool done = false;
  beast::error_code result;
  impl_->ws.async_write(net::buffer(text.data(), text.size()), [&](beast::error_code ec, size_t) {
    result = ec;
    done = true;
  });
  if (!run_with_timeout(impl_->ioc, impl_->ws.next_layer(), done, 30000)) {
    impl_->broken = true;
    return Status::error("timeout");
  }
  if (result) {
    impl_->broken = true;
    return Status::error("send failed: " + result.message());
  }
  return {};
}

Result<std::string> WsClient::receive(int timeout_ms) {
  if (impl_->broken) return Status::error("closed: the connection is broken");
  bool done = false;
  beast::error_code result;
  impl_->buffer.consume(impl_->buffer.size());
  impl_->ws.async_read(impl_->buffer, [&](beast::error_code ec, size_t) {
    result = ec;
    done = true;
  });
  if (!run_with_timeout(impl_->ioc, impl_->ws.next_layer(), done, timeout_ms)) {
    impl_->broken = true;  // a frame may have been half read
    return Status::error("timeout");
  }
  if (result) {
    impl_->broken = true;
    std::string why = result.message();
    if (result == websocket::error::closed) why = "the node closed the connection (" + std::to_string(impl_->ws.reason().code) + ")";
    return Status::error("closed: " + why);
  }
  return beast::buffers_to_string(impl_->buffer.data());
}

void WsClient::close() {
  if (!impl_->broken && impl_->ws.is_open()) {
    bool done = false;
    impl_->ws.async_close(websocket::close_code::normal, [&](beast::error_code) { done = true; });
    run_with_timeout(impl_->ioc, impl_->ws.next_layer(), done, 2000);
  }
  abort();
}

void WsClient::abort() {
  impl_->broken = true;
  beast::error_code ignored;
  impl_->ws.next_layer().shutdown(tcp::socket::shutdown_both, ignored);
  impl_->ws.next_layer().close(ignored);
}

Result<HttpResponse> http_request(const HostPort& node, const std::string& method, const std::string& target,
                                  const std::string& body, const std::vector<std::pair<std::string, std::string>>& headers,
                                  int timeout_ms) {
  net::io_context ioc;
  tcp::socket socket(ioc);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto left = [&] {
    return std::max<int>(1, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 deadline - std::chrono::steady_clock::now()).count()));
  };
  if (Status s = connect_socket(ioc, socket, node, timeout_ms); !s.ok()) return s;

  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, node.host + ":" + std::to_string(node.port));
  req.set(http::field::user_agent, "revis-client");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.keep_alive(false);
  req.prepare_payload();

  bool done = false;
  beast::error_code result;
  http::async_write(socket, req, [&](beast::error_code ec, size_t) {
    result = ec;
    done = true;
  });
  if (!run_with_timeout(ioc, socket, done, left())) return Status::error("timed out sending the request");
  if (result) return Status::error("sending the request failed: " + result.message());

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(256u << 20);
  done = false;
  http::async_read(socket, buffer, parser, [&](beast::error_code ec, size_t) {
    result = ec;
    done = true;
  });
  if (!run_with_timeout(ioc, socket, done, left())) return Status::error("timed out waiting for the response");
  if (result) return Status::error("reading the response failed: " + result.message());
  http::response<http::string_body> res = parser.release();
  HttpResponse out;
  out.status = res.result_int();
  for (const auto& field : res) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    out.headers[name] = std::string(field.value());
  }
  out.body = std::move(res.body());
  beast::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  return out;
}

}  // namespace revis::node
