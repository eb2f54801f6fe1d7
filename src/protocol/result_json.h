// The parts of a job's result that the ticket protocol's events carry as
// JSON (docs/protocol.md), shared with the HTTP APIs that answer in the same
// shapes (api/openai_api.h): log-probabilities in OpenAI's chat shape, and
// tool calls.
//
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "protocol/job.h"

namespace revis::node {

// One token's {token, bytes, logprob} (-inf, a token a constraint ruled
// out, written as OpenAI's floor -9999).
nlohmann::json token_choice_json(const TokenChoice& choice);
// Logprob entries as OpenAI's chat shape ([{token, bytes, logprob,
// top_logprobs: [{token, bytes, logprob}]}]), which the ticket protocol
// carries too, and back (bytes win over token; malformed items are skipped).
nlohmann::json logprobs_content(std::span<const LogprobEntry> entries);
std::vector<LogprobEntry> logprobs_from_content(const nlohmann::json& content);
// Tool calls as the ticket protocol's done carries them ([{id, name,
// arguments}]), and back (malformed items are skipped).
nlohmann::json tool_calls_json(std::span<const ToolCall> calls);
std::vector<ToolCall> tool_calls_from_json(const nlohmann::json& calls);

}  // namespace revis::node
