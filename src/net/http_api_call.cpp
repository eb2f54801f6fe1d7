// An HTTP API request on an HttpSession (http_session.h): parsed once on a
// preparation thread, its tickets (one per choice) handed to the desk, and
// their events turned into the response by the relay.
#include <ctime>

#include "api/anthropic_api.h"
#include "api/embeddings_api.h"
#include "api/prompt_count.h"
#include "api/responses_api.h"
#include "api/ticket_job.h"
#include "net/http_session.h"

namespace revis::node {

void HttpSession::send(TicketEvent event) {
  net::post(events_, [self = shared_from_this(), event = std::move(event)] { self->on_openai_event(event); });
}

void HttpSession::refuse(const std::optional<std::string>& id, const NodeError& error) {
  state_.node.count_refused("openai", error.code);
  send(error_event(id, error));
}

void HttpSession::prepare(std::function<std::function<void()>()> work) {
  auto self = shared_from_this();
  const bool queued = state_.prep.post(lane_, [self, work = std::move(work)] {
    net::post(self->stream_.get_executor(), [self, then = work()] {
      if (!self->dead_) then();
    });
  });
  if (!queued) respond_error(preparation_busy(state_.node.config()));
}

void HttpSession::refuse_prepared(const NodeError& error, bool anthropic) {
  refuse_prepared(error, anthropic ? anthropic_error_for(error) : openai_error_for(error));
}

void HttpSession::refuse_prepared(const NodeError& error, std::string body) {
  state_.node.count_refused("openai", error.code);
  respond_error(error, std::move(body));
}

void HttpSession::openai(std::string body, bool chat) {
  prepare([self = shared_from_this(), body = std::move(body), chat,
           limits = state_.node.request_limits()]() -> std::function<void()> {
    auto request = chat ? parse_chat_request(body, limits) : parse_completion_request(body, limits);
    if (!request.ok()) return [self, error = request.error()] { self->refuse_prepared(error, false); };
    return [self, body, request = std::move(*request)]() mutable { self->start_openai(body, std::move(request)); };
  });
}

void HttpSession::start_openai(std::string body, OpenAiRequest request) {
  const bool chat = request.chat;
  const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
  relay_.emplace(OpenAiRelay::Shape{.stream = request.stream, .choices = static_cast<size_t>(request.n), .id = id},
                 openai_format({.chat = chat,
                                .id = id,
                                .model = state_.node.tier_for_model(request.model),
                                .created = std::time(nullptr),
                                .include_usage = request.include_usage,
                                .logprobs = request.logprobs}));
  const std::string model = request.model;
  const bool stream = request.stream;
  const std::optional<uint64_t> seed = request.seed_given ? std::optional(request.sampling.seed) : std::nullopt;
  start_api_request(model, stream, std::move(body), seed, openai_job(std::move(request)));
}

void HttpSession::messages(std::string body) {
  prepare([self = shared_from_this(), body = std::move(body),
           limits = state_.node.request_limits()]() -> std::function<void()> {
    auto request = parse_messages_request(body, limits);
    if (!request.ok()) return [self, error = request.error()] { self->refuse_prepared(error, true); };
    return [self, request = std::move(*request)]() mutable {
      const std::string id = random_id("msg_");
      auto format = anthropic_format(id, self->state_.node.tier_for_model(request.chat.model));
      self->start_rewritten_chat(id, std::move(request.chat_body), std::move(request.chat), std::move(format));
    };
  });
}

void HttpSession::count_tokens(std::string body) {
  prepare([self = shared_from_this(), &node = state_.node, body = std::move(body),
           limits = state_.node.request_limits()]() -> std::function<void()> {
    auto request = parse_count_tokens_request(body, limits);
    if (!request.ok()) return [self, error = request.error()] { self->refuse_prepared(error, true); };
    const Outcome<int> count = count_prompt_tokens(node, request->chat);
    if (count.ok()) return [self, n = *count] { self->respond_json(http::status::ok, count_tokens_response(n)); };
    if (count.error().code != ErrorCode::kModelUnavailable)
      return [self, error = count.error()] { self->refuse_prepared(error, true); };
    // Not loaded here: a run of one token, placed as any request is, loads
    // the model where it runs and reports the prompt.
    return [self, request = std::move(*request)]() mutable {
      const std::string id = random_id("count_");
      const std::string model = request.chat.model;
      self->relay_.emplace(OpenAiRelay::Shape{.stream = false, .choices = 1, .id = id}, count_tokens_format());
      self->start_api_request(model, false, std::move(request.chat_body), std::nullopt, openai_job(std::move(request.chat)));
    };
  });
}

void HttpSession::responses(std::string body) {
  prepare([self = shared_from_this(), body = std::move(body), &store = state_.responses,
           limits = state_.node.request_limits()]() -> std::function<void()> {
    auto request = parse_responses_request(body, store, limits);
    if (!request.ok()) return [self, error = request.error()] { self->refuse_prepared(error, false); };
    return [self, request = std::move(*request)]() mutable {
      const std::string id = random_id("resp_");
      auto format = responses_format({.id = id,
                                      .model = self->state_.node.tier_for_model(request.chat.model),
                                      .created = std::time(nullptr),
                                      .settings = std::move(request.settings),
                                      .logprobs = request.chat.logprobs,
                                      .store = request.store ? &self->state_.responses : nullptr,
                                      .conversation = std::move(request.conversation),
                                      .namespaced = std::move(request.namespaced)});
      self->start_rewritten_chat(id, std::move(request.chat_body), std::move(request.chat), std::move(format));
    };
  });
}

void HttpSession::start_rewritten_chat(const std::string& id, std::string chat_body, OpenAiRequest chat,
                                       std::unique_ptr<AnswerFormat> format) {
  const std::string model = chat.model;
  const bool stream = chat.stream;
  relay_.emplace(OpenAiRelay::Shape{.stream = stream, .choices = 1, .id = id}, std::move(format));
  start_api_request(model, stream, std::move(chat_body), std::nullopt, openai_job(std::move(chat)));
}

void HttpSession::embeddings(std::string body) {
  prepare([self = shared_from_this(), body = std::move(body),
           limits = state_.node.request_limits()]() -> std::function<void()> {
    auto request = parse_embedding_request(body, limits);
    if (!request.ok()) return [self, error = request.error()] { self->refuse_prepared(error, false); };
    return [self, body, request = std::move(*request)]() mutable {
      const std::string id = random_id("embd-");
      const std::string model = request.model;
      self->relay_.emplace(OpenAiRelay::Shape{.stream = false, .choices = 1, .id = id},
                           embeddings_format(self->state_.node.tier_for_model(model), request.base64));
      self->start_api_request(model, false, body, std::nullopt, embeddings_job(std::move(request)));
    };
  });
}

void HttpSession::start_api_request(const std::string& model, bool stream, std::string body, std::optional<uint64_t> seed,
                                    JobSpec job) {
  request_id_ = relay_->ticket_id(0);
  api_ticket_.emplace();
  api_ticket_->task = job.task;
  api_ticket_->streaming = stream;
  api_ticket_->openai = state_.node.openai_call(model, std::move(body), seed);
  api_ticket_->job = std::make_shared<const Outcome<JobSpec>>(std::move(job));
  job_active_ = true;
  ++job_generation_;
  stream_.expires_never();  // a long generation is not an idle connection
  watch_for_disconnect();
  send_choice(0, received_);
}

void HttpSession::send_choice(size_t choice, Clock::time_point received) {
  Ticket ticket = *api_ticket_;
  ticket.id = relay_->ticket_id(choice);
  ticket.openai->seed = choice_seed(api_ticket_->openai->seed, choice);
  auto self = shared_from_this();
  if (!state_.prep.post(lane_, [self, ticket, received]() mutable {
        self->state_.desk.on_ticket(self, std::move(ticket), received);
      }))
    refuse(relay_->ticket_id(choice), preparation_busy(state_.node.config()));
}

void HttpSession::tell_desk_cancel(const std::string& id) {
  state_.prep.post_always(lane_, [self = shared_from_this(), id] { self->state_.desk.on_cancel(self, id); });
}

void HttpSession::tell_desk_disconnect() {
  state_.prep.post_always(lane_, [self = shared_from_this()] { self->state_.desk.on_disconnect(self); });
}

void HttpSession::on_openai_event(const TicketEvent& event) {
  if (!job_active_ || !relay_) return;
  OpenAiRelay::Step step = relay_->on_event(event);
  if (step.open_stream) {
    sse_bytes_ = 0;
    // SSE (or NDJSON) over HTTP/1.1 chunked encoding, framed here so that
    // the header and every event go through one ordered write queue.
    const char* type = relay_->framing() == StreamFraming::kNdjson ? "application/x-ndjson" : "text/event-stream";
    raw_write(
        "HTTP/1.1 200 OK\r\nServer: revis\r\nContent-Type: " + std::string(type) + "\r\nCache-Control: no-cache\r\n" +
        (cors_origin_.empty() ? "" : "Access-Control-Allow-Origin: " + cors_origin_ + "\r\nVary: Origin\r\n") +
        "Transfer-Encoding: chunked\r\nConnection: " + std::string(keep_alive_ ? "keep-alive" : "close") + "\r\n\r\n");
  }
  for (const SseEvent& e : step.events) sse_event(e);
  if (step.cancel) tell_desk_cancel(relay_->ticket_id(relay_->current_choice()));
  if (step.next_choice) send_choice(*step.next_choice, Clock::now());
  if (!step.finished) return;
  job_active_ = false;
  api_ticket_.reset();
  if (step.response) return respond_json(http::status::ok, std::move(*step.response));
  if (step.error) return respond_error(*step.error, relay_->error_body(*step.error));
  raw_write("0\r\n\r\n");
  sse_finished_ = true;
}

void HttpSession::sse_event(const SseEvent& e) {
  std::string payload = relay_->framing() == StreamFraming::kNdjson
                            ? e.data + "\n"
                            : (e.name.empty() ? "" : "event: " + e.name + "\n") + "data: " + e.data + "\n\n";
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
  raw_write(size + payload + "\r\n");
}

void HttpSession::watch_for_disconnect() {
  const uint64_t generation = job_generation_;
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), generation](beast::error_code ec) {
    if (ec || !self->job_active_ || self->job_generation_ != generation) return;
    beast::error_code avail_ec;
    if (self->stream_.socket().available(avail_ec) == 0 || avail_ec) self->tell_desk_disconnect();
  });
}

}  // namespace revis::node
