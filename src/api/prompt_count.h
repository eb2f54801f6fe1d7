// How many tokens a chat request's prompt is (Anthropic's
// /v1/messages/count_tokens): the request's job rendered through the
// tier's chat template, with its tools, and tokenized by the tier's
// tokenizer, exactly as the executor does before it runs the job
// (node/job_prompt.h), so the count is the prompt_tokens the answer would
// report.
//
// The count is made on this node with the tier's model as it is loaded
// here, and never loads one: a tier whose model is not loaded here is
// model_unavailable, as is the simulated engine, which has no tokenizer;
// the caller then runs the request for one token instead, whose answer
// reports its prompt (anthropic_api.h, count_tokens_format).
//
// Thread-safety: may be called from any thread (a preparation thread).
#pragma once

#include "api/openai_api.h"
#include "node/node.h"
#include "protocol/errors.h"

namespace revis::node {

Outcome<int> count_prompt_tokens(const Node& node, const OpenAiRequest& request);

}  // namespace revis::node
