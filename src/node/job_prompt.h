// A job's prompt as a model's tokens: the messages through the model's chat
// template (or the raw prompt as is), control-token texts parsed only in
// the template's markup (or in a raw prompt outside the task's arguments), BOS as the model asks
// unless the template wrote it. The executor tokenizes every job this way;
// the dispatcher does the same to find which node's KV checkpoints already
// hold the prompt's prefixes, so both must agree to the token.
//
// Thread-safety: pure; the model's tokenizer is immutable.
#pragma once

#include <cstdint>
#include <vector>

#include "node/tier_pool.h"
#include "protocol/job.h"

namespace revis::node {

struct JobPrompt {
  std::vector<int32_t> tokens;
  bool opens_reasoning = false;  // the template left the model inside its thinking block
};

Result<JobPrompt> job_prompt_tokens(const LoadedModel& model, const JobSpec& spec);

}  // namespace revis::node
