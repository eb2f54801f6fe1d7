#include "api/ticket_job.h"

#include <memory>
#include <utility>

namespace revis::node {
namespace {

JobSpec api_job(const char* task) {
  JobSpec spec;
  spec.source = "openai";
  spec.task = task;
  return spec;
}

Outcome<JobSpec> openai_body_job(const Ticket& ticket, const RequestLimits& limits) {
  const std::string& body = ticket.openai->body;
  if (ticket.task == kOpenAiEmbeddingsTask) {
    auto request = parse_embedding_request(body, limits);
    if (!request.ok()) return request.error();
    return embeddings_job(std::move(*request));
  }
  const bool chat = ticket.task == kOpenAiChatTask;
  auto request = chat ? parse_chat_request(body, limits) : parse_completion_request(body, limits);
  if (!request.ok()) return request.error();
  return openai_job(std::move(*request));
}

}  // namespace

JobSpec openai_job(OpenAiRequest r) {
  JobSpec spec = api_job(r.chat ? kOpenAiChatTask : kOpenAiCompletionTask);
  spec.raw = !r.chat;
  spec.messages = std::move(r.messages);
  spec.chat_options = std::move(r.chat_options);
  spec.tool_use = std::move(r.tool_use);
  spec.prompt = std::move(r.prompt);
  spec.max_tokens = r.max_tokens;
  spec.sampling = r.sampling;
  spec.stop = std::move(r.stop);
  spec.grammar = std::move(r.grammar);
  spec.logprobs = r.logprobs;
  spec.top_logprobs = r.top_logprobs;
  return spec;
}

JobSpec embeddings_job(EmbeddingRequest r) {
  JobSpec spec = api_job(kOpenAiEmbeddingsTask);
  spec.embed = std::move(r.inputs);
  return spec;
}

void read_ticket_job(Ticket& ticket, const Node& node) {
  ticket.job = std::make_shared<const Outcome<JobSpec>>(ticket.openai ? openai_body_job(ticket, node.request_limits())
                                                                      : node.catalogue_job(ticket));
}

}  // namespace revis::node
