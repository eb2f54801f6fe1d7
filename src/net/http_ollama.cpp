// Ollama's API on an HttpSession (http_session.h): the model endpoints
// answered from the node's state, chat, generate and embed prepared on a
// preparation thread and run as tickets like any API request, their
// answers NDJSON (api/ollama_api.h).
#include "api/ollama_api.h"
#include "api/ollama_models.h"
#include "api/ticket_job.h"
#include "net/http_session.h"

namespace revis::node {
namespace {

// Ollama's endpoints that change the set of models: revis serves the
// models its configuration names.
constexpr const char* kModelManagement[] = {"/api/pull", "/api/push", "/api/create", "/api/copy", "/api/delete"};

}  // namespace

void HttpSession::ollama(http::request<http::string_body>& req, const std::string& path) {
  const bool get = req.method() == http::verb::get, post = req.method() == http::verb::post;
  if (path == "/api/version") {
    if (!get) return method_not_allowed();
    return respond_json(http::status::ok, ollama_version());
  }
  if (path == "/api/tags" || path == "/api/ps") {
    if (!get) return method_not_allowed();
    const std::vector<OllamaModel> models = ollama_models(state_.node);
    return respond_json(http::status::ok, path == "/api/tags" ? ollama_tags(models) : ollama_ps(models));
  }
  if (path == "/api/show") {
    if (!post) return method_not_allowed();
    auto name = parse_ollama_show(req.body(), state_.node.request_limits());
    if (!name.ok()) return refuse_prepared(name.error(), ollama_error_for(name.error()));
    const std::string tier = state_.node.tier_for_model(*name);
    for (const OllamaModel& m : ollama_models(state_.node))
      if (m.name == tier) return respond_json(http::status::ok, ollama_show(m));
    return respond_json(http::status::not_found, ollama_error("model '" + *name + "' not found"));
  }
  if (path == "/api/chat" || path == "/api/generate") {
    if (!post) return method_not_allowed();
    return ollama_generation(std::move(req.body()), path == "/api/chat");
  }
  if (path == "/api/embed" || path == "/api/embeddings") {
    if (!post) return method_not_allowed();
    return ollama_embed(std::move(req.body()), path == "/api/embeddings");
  }
  for (const char* managing : kModelManagement)
    if (path == managing)
      return respond_json(http::status::bad_request,
                          ollama_error(path + " is not supported: revis serves the models its configuration names "
                                              "(revis serve -m, [tiers]; revis pull fetches from Hugging Face)"));
  respond_json(http::status::not_found, ollama_error("no such endpoint: " + path));
}

void HttpSession::ollama_generation(std::string body, bool chat) {
  prepare([self = shared_from_this(), body = std::move(body), chat,
           limits = state_.node.request_limits()]() -> std::function<void()> {
    auto request = chat ? parse_ollama_chat(body, limits) : parse_ollama_generate(body, limits);
    if (!request.ok())
      return [self, error = request.error()] { self->refuse_prepared(error, ollama_error_for(error)); };
    return [self, chat, request = std::move(*request)]() mutable { self->start_ollama(chat, std::move(request)); };
  });
}

void HttpSession::start_ollama(bool chat, OllamaRequest request) {
  const std::string tier = state_.node.tier_for_model(request.model);
  if (request.load_only) return respond_json(http::status::ok, ollama_load_response(chat, tier));
  if (auto error = check_num_ctx(request, tier_context(state_.node, tier)))
    return refuse_prepared(*error, ollama_error_for(*error));
  const std::string id = random_id(chat ? "chat-" : "generate-");
  relay_.emplace(OpenAiRelay::Shape{.stream = request.stream, .choices = 1, .id = id}, ollama_format(chat, tier));
  const std::optional<uint64_t> seed =
      request.chat.seed_given ? std::optional(request.chat.sampling.seed) : std::nullopt;
  start_api_request(request.model, request.stream, std::move(request.chat_body), seed,
                    openai_job(std::move(request.chat)));
}

void HttpSession::ollama_embed(std::string body, bool legacy) {
  prepare([self = shared_from_this(), body = std::move(body), legacy,
           limits = state_.node.request_limits()]() -> std::function<void()> {
    auto request = parse_ollama_embed(body, legacy, limits);
    if (!request.ok())
      return [self, error = request.error()] { self->refuse_prepared(error, ollama_error_for(error)); };
    return [self, legacy, request = std::move(*request)]() mutable {
      const std::string id = random_id("embd-");
      const std::string model = request.embed.model;
      self->relay_.emplace(OpenAiRelay::Shape{.stream = false, .choices = 1, .id = id},
                           ollama_embed_format(self->state_.node.tier_for_model(model), legacy));
      self->start_api_request(model, false, std::move(request.openai_body), std::nullopt,
                              embeddings_job(std::move(request.embed)));
    };
  });
}

}  // namespace revis::node
