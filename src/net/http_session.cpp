#include "net/http_session.h"

#include <ctime>

#include <boost/beast/websocket.hpp>

#include "api/anthropic_api.h"
#include "api/responses_api.h"
#include "net/access_log.h"
#include "net/ws_session.h"

namespace revis::node {
namespace {

namespace websocket = beast::websocket;

// After refusing a request whose bytes were not all read, the connection
// reads and discards for this long (and this much) before it closes, so that
// the client reads the refusal instead of a reset.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 4u << 20;

// The status for a request the parser refused (docs/protocol.md), or none
// when the connection just ended or timed out. Over the header limit, the
// request line decides: the parser fills in the target once it has read it.
std::optional<http::status> refusal_status(beast::error_code ec, bool request_line_read) {
  if (ec == http::error::body_limit) return http::status::payload_too_large;
  if (ec == http::error::header_limit)
    return request_line_read ? http::status::request_header_fields_too_large : http::status::uri_too_long;
  if (ec.category() != make_error_code(http::error::bad_method).category() || ec == http::error::end_of_stream ||
      ec == http::error::partial_message || ec == http::error::short_read)
    return std::nullopt;
  return http::status::bad_request;  // broken framing: line endings, fields, lengths, chunks
}

// Framing the parser lets through but that a smuggling front could read
// differently: more than one Content-Length, or too many fields.
template <class Request>
std::optional<std::pair<http::status, const char*>> framing_problem(const Request& req) {
  if (std::distance(req.begin(), req.end()) > static_cast<std::ptrdiff_t>(kMaxHeaderFields))
    return std::pair{http::status::request_header_fields_too_large, "too many header fields"};
  if (req.count(http::field::content_length) > 1) return std::pair{http::status::bad_request, "more than one Content-Length"};
  return std::nullopt;
}

}  // namespace

void HttpSession::close_if_idle() {
  if (job_active_ || writing_) return;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

void HttpSession::do_read() {
  cors_origin_.clear();
  if (buffer_.size() > 0) return read_request();  // the client sent it already (pipelining)
  state_.connections.set_idle(slot_, weak_from_this());
  if (served_) stream_.expires_after(std::chrono::seconds(state_.node.config().idle_timeout_s));
  else stream_.expires_at(first_request_by_);
  stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->state_.connections.set_busy(self->slot_);
    if (ec) return self->close();
    self->buffer_.commit(n);
    self->read_request();
  });
}

void HttpSession::read_request() {
  started_ = Clock::now();
  method_ = route_ = "-";
  request_id_.clear();
  parser_.emplace();
  parser_->body_limit(state_.node.config().max_request_bytes);
  parser_->header_limit(kMaxHeaderBytes);
  if (served_) stream_.expires_after(kHttpReadTimeout);
  else stream_.expires_at(first_request_by_);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
}

void HttpSession::on_read(beast::error_code ec) {
  if (ec) {
    const std::optional<http::status> status = refusal_status(ec, !parser_->get().target().empty());
    if (!status) return close();
    std::string why = ec.message();
    if (*status == http::status::payload_too_large)
      why = "the request body is larger than " + std::to_string(state_.node.config().max_request_bytes) + " bytes";
    if (*status == http::status::uri_too_long) why = "the request line is longer than " + std::to_string(kMaxHeaderBytes) + " bytes";
    if (*status == http::status::request_header_fields_too_large)
      why = "the request header is larger than " + std::to_string(kMaxHeaderBytes) + " bytes";
    return refuse_framing(*status, why);
  }
  received_ = Clock::now();
  http::request<http::string_body> req = parser_->release();
  method_ = std::string(req.method_string());
  route_ = std::string(req.target().substr(0, req.target().find('?')));
  if (auto problem = framing_problem(req)) return refuse_framing(problem->first, problem->second);
  keep_alive_ = req.keep_alive();
  if (!admitted(req)) return;
  if (req.method() == http::verb::options) return preflight(req);
  const std::string path = route_;

  if (websocket::is_upgrade(req)) {
    if (path != "/v1/revis/stream") return respond_json(http::status::not_found, R"({"error":"no WebSocket endpoint here; use /v1/revis/stream"})");
    if (!authorized(state_, req) && !authorized_by_subprotocol(state_, req)) return unauthorized();
    if (state_.stopping) return respond_json(http::status::service_unavailable, R"({"error":"the node is shutting down"})");
    stream_.expires_never();
    log_request(101, 0);
    auto ws = std::make_shared<WsSession>(std::move(stream_), std::move(slot_), state_);
    state_.ws_sessions.push_back(ws);
    ws->start(std::move(req));
    return;
  }
  route(req, path);
}

bool HttpSession::admitted(const http::request<http::string_body>& req) {
  const std::string_view host = field_value(req, http::field::host), origin = field_value(req, http::field::origin);
  if (host.empty() && req.version() >= 11) {
    refuse_request(http::status::bad_request, "an HTTP/1.1 request needs a Host header", "bad_request");
    return false;
  }
  if (!state_.guard.host_allowed(host)) {
    refuse_request(http::status::forbidden,
                   "this node does not answer to the Host this request names (a node without a token answers its "
                   "addresses, localhost and its names; see --allow-host)",
                   "forbidden_host");
    return false;
  }
  switch (state_.guard.classify_origin(origin, host)) {
    case RequestGuard::Origin::kForeign:
      refuse_request(http::status::forbidden, "web pages from this request's Origin may not call this node (see --allow-origin)",
                     "forbidden_origin");
      return false;
    case RequestGuard::Origin::kAllowed: cors_origin_ = origin; break;
    case RequestGuard::Origin::kNone:
    case RequestGuard::Origin::kSame: break;
  }
  return true;
}

void HttpSession::preflight(const http::request<http::string_body>& req) {
  http::response<http::string_body> res{http::status::no_content, 11};
  res.set(http::field::allow, "GET, POST, DELETE, OPTIONS");
  if (!cors_origin_.empty()) {
    res.set(http::field::access_control_allow_methods, "GET, POST, DELETE, OPTIONS");
    const std::string_view asked = field_value(req, http::field::access_control_request_headers);
    res.set(http::field::access_control_allow_headers, asked.empty() ? std::string("Authorization, Content-Type") : std::string(asked));
    res.set(http::field::access_control_max_age, "600");
  }
  send_response(std::move(res));
}

void HttpSession::route(http::request<http::string_body>& req, const std::string& path) {
  const bool get = req.method() == http::verb::get, post = req.method() == http::verb::post;
  if (path == "/health") {
    if (!get) return method_not_allowed();
    switch (state_.node.health()) {
      case Health::kOk: return respond_json(http::status::ok, R"({"status":"ok"})");
      case Health::kLoading: return respond_json(http::status::service_unavailable, R"({"status":"loading"})");
      case Health::kStopping: return respond_json(http::status::service_unavailable, R"({"status":"stopping"})");
      case Health::kFailed: return respond_json(http::status::service_unavailable, R"({"status":"failed"})");
    }
  }
  // Ollama's clients check that a server is up with HEAD /.
  if (path == "/" && req.method() == http::verb::head) return respond(http::status::ok, "text/plain", "");
  if (const WebAsset* asset = find_web_asset(path)) {  // static, no data: no token
    if (!get) return method_not_allowed();
    return web_asset(req, *asset);
  }
  if (!authorized(state_, req)) return unauthorized();
  if (path == "/v1/revis/status") {
    if (!get) return method_not_allowed();
    return respond_json(http::status::ok, state_.node.status_json());
  }
  if (path == "/v1/revis/cluster") {
    if (!get) return method_not_allowed();
    return respond_json(http::status::ok, state_.desk.cluster_json());
  }
  if (path == "/metrics") {
    if (!get) return method_not_allowed();
    return respond(http::status::ok, "text/plain; version=0.0.4; charset=utf-8", state_.node.metrics_text());
  }
  if (path == "/v1/models") {
    if (!get) return method_not_allowed();
    return respond_json(http::status::ok, models_list(state_.node.model_ids(), std::time(nullptr), "revis"));
  }
  if (path.starts_with("/v1/models/")) {
    if (!get) return method_not_allowed();
    const std::string id = path.substr(std::string_view("/v1/models/").size());
    if (auto entry = model_entry(state_.node.model_ids(), id, std::time(nullptr), "revis"))
      return respond_json(http::status::ok, std::move(*entry));
    return respond_json(http::status::not_found,
                        openai_error("the model '" + id + "' does not exist", "invalid_request_error", "model_not_found"));
  }
  if (path == "/v1/chat/completions" || path == "/v1/completions") {
    if (!post) return method_not_allowed();
    return openai(std::move(req.body()), path == "/v1/chat/completions");
  }
  if (path == "/v1/embeddings") {
    if (!post) return method_not_allowed();
    return embeddings(std::move(req.body()));
  }
  if (path == "/v1/messages") {
    if (!post) return method_not_allowed();
    return messages(std::move(req.body()));
  }
  if (path == "/v1/messages/count_tokens") {
    if (!post) return method_not_allowed();
    return count_tokens(std::move(req.body()));
  }
  if (path == "/v1/responses") {
    if (!post) return method_not_allowed();
    return responses(std::move(req.body()));
  }
  if (path.starts_with("/v1/responses/")) {
    const bool remove = req.method() == http::verb::delete_;
    if (!get && !remove) return method_not_allowed();
    const std::string id = path.substr(std::string_view("/v1/responses/").size());
    auto [status, body] = stored_response_request(state_.responses, id, remove);
    return respond_json(static_cast<http::status>(status), std::move(body));
  }
  if (ollama_route()) return ollama(req, path);
  if (path == "/v1/revis/stream")
    return respond_json(http::status::upgrade_required, R"({"error":"this endpoint speaks WebSocket only"})");
  respond_json(http::status::not_found, openai_error("no such endpoint: " + path, "invalid_request_error", "not_found"));
}

void HttpSession::web_asset(const http::request<http::string_body>& req, const WebAsset& asset) {
  const bool fresh = field_value(req, http::field::if_none_match) == asset.file->etag;
  http::response<http::string_body> res{fresh ? http::status::not_modified : http::status::ok, 11};
  res.set(http::field::content_type, std::string(asset.content_type));
  for (const auto& [name, value] : web_asset_headers(asset)) res.set(std::string(name), std::string(value));
  if (!fresh) res.body() = std::string(asset.file->body);
  send_response(std::move(res));
}

void HttpSession::raw_write(std::string bytes) {
  if (dead_) return;
  queued_bytes_ += bytes.size();
  if (queued_bytes_ > kMaxBufferedBytes) return close();
  sse_bytes_ += bytes.size();
  outbox_.push_back(std::move(bytes));
  if (!writing_) write_next();
}

void HttpSession::write_next() {
  writing_ = true;
  net::async_write(stream_.socket(), net::buffer(outbox_.front()),
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->writing_ = false;
                     if (ec) return self->close();
                     self->queued_bytes_ -= self->outbox_.front().size();
                     self->outbox_.pop_front();
                     if (!self->outbox_.empty()) return self->write_next();
                     if (self->sse_finished_) {
                       self->sse_finished_ = false;
                       self->log_request(200, self->sse_bytes_);
                       if (!self->keep_alive_) return self->close();
                       self->served_ = true;
                       self->do_read();
                     }
                   });
}

void HttpSession::refuse_framing(http::status status, const std::string& why) {
  linger_ = true;
  refuse_request(status, why, status == http::status::payload_too_large ? "too_long" : "bad_request");
}

void HttpSession::refuse_request(http::status status, const std::string& why, const char* code) {
  keep_alive_ = false;
  respond_json(status, openai_error(why, "invalid_request_error", code));
}

void HttpSession::respond_error(const NodeError& e, std::string body) {
  http::response<http::string_body> res{static_cast<http::status>(http_status_for(e.code)), 11};
  if (e.code == ErrorCode::kQueueFull)
    res.set(http::field::retry_after, std::to_string(state_.node.executor().retry_after_seconds()));
  res.set(http::field::content_type, "application/json");
  res.body() = std::move(body);
  send_response(std::move(res));
}

void HttpSession::unauthorized() {
  keep_alive_ = false;  // a connection without the token gets no second try
  http::response<http::string_body> res{http::status::unauthorized, 11};
  res.set(http::field::www_authenticate, "Bearer");
  res.set(http::field::content_type, "application/json");
  const std::string why = "missing or wrong token (Authorization: Bearer ..., or x-api-key)";
  res.body() = ollama_route()      ? ollama_error(why)
               : anthropic_route() ? anthropic_error("authentication_error", why)
                                   : openai_error(why, "invalid_request_error", "invalid_api_key");
  send_response(std::move(res));
}

void HttpSession::method_not_allowed() {
  respond_json(http::status::method_not_allowed,
               ollama_route()      ? ollama_error("method not allowed")
               : anthropic_route() ? anthropic_error("invalid_request_error", "method not allowed")
                                   : openai_error("method not allowed", "invalid_request_error", "method_not_allowed"));
}

void HttpSession::respond(http::status status, const char* content_type, std::string body) {
  http::response<http::string_body> res{status, 11};
  res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  send_response(std::move(res));
}

void HttpSession::send_response(http::response<http::string_body> res) {
  res.set(http::field::server, "revis");
  if (!cors_origin_.empty()) {
    res.set(http::field::access_control_allow_origin, cors_origin_);
    res.set(http::field::vary, "Origin");
  }
  res.keep_alive(keep_alive_ && !state_.stopping);
  res.prepare_payload();
  auto msg = std::make_shared<http::response<http::string_body>>(std::move(res));
  writing_ = true;
  stream_.expires_after(kHttpReadTimeout);
  http::async_write(stream_, *msg, [self = shared_from_this(), msg](beast::error_code ec, size_t n) {
    self->writing_ = false;
    self->log_request(msg->result_int(), n);
    if (!ec && self->linger_) return self->linger();
    if (ec || !msg->keep_alive()) return self->close();
    self->served_ = true;
    self->do_read();
  });
}

void HttpSession::log_request(unsigned status, uint64_t bytes) {
  log_access({.client = client_,
              .method = method_,
              .route = route_,
              .status = std::to_string(status),
              .bytes = bytes,
              .duration_ms = ms_since(started_),
              .ticket_id = request_id_});
}

void HttpSession::linger() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(kLingerTime);
  buffer_.clear();
  drain();
}

void HttpSession::drain() {
  stream_.async_read_some(buffer_.prepare(16 * 1024), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->lingered_ += n;
    if (ec || self->lingered_ > kLingerBytes) return self->close();
    self->drain();
  });
}

void HttpSession::close() {
  if (dead_) return;
  dead_ = true;
  if (job_active_) tell_desk_disconnect();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.socket().close(ignored);
  slot_.release();
}

}  // namespace revis::node
