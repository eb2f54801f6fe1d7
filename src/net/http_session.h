// One HTTP connection: requests read with Beast's parser under the
// framing limits, refused before routing where the Host, the Origin or the
// token say so, routed (net/server.h lists the endpoints), and answered in
// order, keep-alive or not. The connection is evicted while it waits for a
// request and the caps are full (net/connection_table.h).
//
// An API request (OpenAI chat, completions, responses, embeddings;
// Anthropic messages; Ollama's chat, generate, embed) is parsed once on a
// preparation thread, becomes a ticket that carries its job (Ticket::job),
// and goes to the desk like any other; while it runs the session is that
// ticket's ClientLink, and the relay
// (api/openai_relay.h) turns the ticket's events into the API's response or
// its stream (Server-Sent Events, or Ollama's NDJSON). http_api_call.cpp
// holds that part, http_ollama.cpp Ollama's endpoints; http_session.cpp the
// rest.
//
// Thread-safety: send() and refuse() may be called from any thread (they
// post to the connection's strand); the preparation threads run only the
// `work` given to prepare(); everything else runs on the I/O thread.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "api/ollama_api.h"
#include "api/openai_api.h"
#include "api/openai_relay.h"
#include "net/server_state.h"
#include "net/web_assets.h"

namespace revis::node {

class HttpSession : public ClientLink, public ConnectionTable::Idle, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, ConnectionTable::Slot slot, ServerState& state)
      : stream_(std::move(socket)), events_(net::make_strand(stream_.get_executor())), state_(state),
        lane_(state.prep.new_lane()), slot_(std::move(slot)), client_(slot_.address()),
        first_request_by_(Clock::now() + std::chrono::seconds(state.node.config().handshake_timeout_s)) {}

  // The events of the API request in progress (its tickets'), from any
  // thread; others are ignored.
  void send(TicketEvent event) override;
  void refuse(const std::optional<std::string>& id, const NodeError& error) override;

  void start() { do_read(); }

  // Only while it waits for a request (ConnectionTable::set_idle).
  void evict() override { close(); }

  // Shutdown: connections waiting for a next request are closed; one with
  // a job in progress finishes its response first.
  void close_if_idle();

 private:
  // ---- An API request run as tickets (http_api_call.cpp)

  // `work` runs on a preparation thread (net/preparation_pool.h): it
  // parses and checks the request, touching nothing of the session, and
  // returns what to do with the result, which runs back on the I/O thread
  // (unless the connection closed meanwhile).
  void prepare(std::function<std::function<void()>()> work);

  // A request refused while it was prepared, in its API's error shape.
  void refuse_prepared(const NodeError& error, bool anthropic);
  // `body`: the error in the request's API's shape.
  void refuse_prepared(const NodeError& error, std::string body);

  // The request becomes a ticket for the desk, which places it like any
  // other (here or on a peer); its events come back through send() and the
  // relay turns them into the OpenAI response. A request for n choices is
  // n tickets, each sent when the one before is done.
  void openai(std::string body, bool chat);

  void start_openai(std::string body, OpenAiRequest request);

  // Anthropic's Messages API: the request as a chat request, the answer
  // in Anthropic's shapes.
  void messages(std::string body);

  // OpenAI's Responses API: the request as a chat request (the
  // conversation of a kept response before it), the answer as a response
  // object, kept in state_.responses unless store is false.
  void responses(std::string body);

  // A request of another API rewritten as one chat request (`chat`, whose
  // text `chat_body` a peer gets), answered in `format` under `id`.
  void start_rewritten_chat(const std::string& id, std::string chat_body, OpenAiRequest chat,
                            std::unique_ptr<AnswerFormat> format);

  void embeddings(std::string body);

  // Anthropic's count_tokens: the prompt counted on a preparation thread
  // (api/prompt_count.h), no ticket.
  void count_tokens(std::string body);

  // ---- Ollama's API (http_ollama.cpp): the model endpoints answered
  // here; chat, generate and embed run as tickets, as the others do.
  void ollama(http::request<http::string_body>& req, const std::string& path);
  void ollama_generation(std::string body, bool chat);
  void start_ollama(bool chat, OllamaRequest request);
  void ollama_embed(std::string body, bool legacy);

  // The first ticket of a request whose relay_ is set: `job`, read from
  // `body` here, once. Choice 0 runs with `seed` (or a fresh one), the
  // others with seeds derived from it.
  void start_api_request(const std::string& model, bool stream, std::string body, std::optional<uint64_t> seed,
                         JobSpec job);

  // The desk takes the ticket (its job read already: admitting it parses
  // nothing) on a preparation thread, in this connection's lane.
  void send_choice(size_t choice, Clock::time_point received);

  // Cancels and the end of the connection follow the tickets the lane
  // still holds, whatever the load.
  void tell_desk_cancel(const std::string& id);
  void tell_desk_disconnect();

  // On the I/O thread: one event of the request in progress.
  void on_openai_event(const TicketEvent& event);
  // One stream event as a chunk of the response, framed as the relay's
  // format says (a Server-Sent Event, or an NDJSON line).
  void sse_event(const SseEvent& e);

  // While a job runs nothing is read from the connection, so a client that
  // hangs up would go unnoticed until the answer is written. Waiting for
  // readability notices it: readable with nothing to read means the peer
  // closed, and the job is cancelled.
  void watch_for_disconnect();

  // ---- The connection: requests, responses, SSE (http_session.cpp)

  // Waits for the first byte of the next request: idle, so the connection
  // may be evicted for a new one, and closed when the wait runs out (the
  // handshake timeout for a new connection, the idle timeout after a
  // request was answered).
  void do_read();

  void read_request();

  void on_read(beast::error_code ec);

  // Host and Origin (net/request_guard.h); false when refused. Remembers
  // an allowed cross-site origin, whose responses carry CORS headers.
  bool admitted(const http::request<http::string_body>& req);

  // OPTIONS: a CORS preflight from an allowed origin gets the methods and
  // the headers it asked for (the OpenAI SDKs send several of their own).
  void preflight(const http::request<http::string_body>& req);

  void route(http::request<http::string_body>& req, const std::string& path);

  void web_asset(const http::request<http::string_body>& req, const WebAsset& asset);

  void raw_write(std::string bytes);

  void write_next();

  // The request could not be framed, so nothing after it on this
  // connection can be either: answer, then close.
  void refuse_framing(http::status status, const std::string& why);

  // A request refused before routing: answered, and the connection closed.
  void refuse_request(http::status status, const std::string& why, const char* code);

  void respond_error(const NodeError& e) { respond_error(e, openai_error_for(e)); }

  // `body`: the error in the request's API's shape.
  void respond_error(const NodeError& e, std::string body);

  void unauthorized();

  void method_not_allowed();

  // Anthropic's clients read errors in Anthropic's shape.
  bool anthropic_route() const { return route_.starts_with("/v1/messages"); }
  // And Ollama's in Ollama's.
  bool ollama_route() const { return route_.starts_with("/api/"); }

  void respond_json(http::status status, std::string body) { respond(status, "application/json", std::move(body)); }

  void respond(http::status status, const char* content_type, std::string body);

  void send_response(http::response<http::string_body> res);

  void log_request(unsigned status, uint64_t bytes);

  // Reads and discards what the client still sends, until it closes or the
  // linger time or size runs out, then closes: closing with unread bytes
  // would reset the connection, and the client could lose the response.
  void linger();

  void drain();

  void close();

  beast::tcp_stream stream_;
  net::strand<net::any_io_executor> events_;  // in send() order, as WsSession's
  ServerState& state_;
  const std::shared_ptr<PreparationPool::Lane> lane_;  // this connection's calls to the desk, in order
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Clock::time_point received_;
  bool keep_alive_ = true, writing_ = false, dead_ = false;
  bool linger_ = false;      // close through linger() after the response
  std::string cors_origin_;  // the request's Origin, when CORS headers answer it
  ConnectionTable::Slot slot_;
  const std::string client_;  // the source address
  // The request in progress, for the access log.
  std::string method_ = "-", route_ = "-";
  Clock::time_point started_ = Clock::now();  // its first byte
  uint64_t sse_bytes_ = 0;
  const Clock::time_point first_request_by_;  // the handshake timeout
  bool served_ = false;                       // a response went out: the idle timeout applies
  size_t lingered_ = 0;
  // The OpenAI request in progress on this connection.
  bool job_active_ = false, sse_finished_ = false;
  uint64_t job_generation_ = 0;
  std::string request_id_;
  std::optional<OpenAiRelay> relay_;
  std::optional<Ticket> api_ticket_;  // what the tickets of its choices have in common
  std::deque<std::string> outbox_;
  size_t queued_bytes_ = 0;
};

}  // namespace revis::node
