#include "api/prompt_count.h"

#include "api/ticket_job.h"
#include "node/job_prompt.h"

namespace revis::node {

Outcome<int> count_prompt_tokens(const Node& node, const OpenAiRequest& request) {
  const std::string tier = node.tier_for_model(request.model);
  if (node.simulated())
    return NodeError{ErrorCode::kModelUnavailable, "the simulated engine has no tokenizer to count tokens with"};
  JobSpec spec = openai_job(request);
  spec.tier = tier;
  std::optional<Result<JobPrompt>> prompt;
  if (!node.tiers().with_loaded(tier, [&](const LoadedModel& m) { prompt = job_prompt_tokens(m, spec); }))
    return NodeError{ErrorCode::kModelUnavailable, "the model of tier '" + tier + "' is not loaded on this node"};
  if (!prompt->ok()) return NodeError{ErrorCode::kBadRequest, "chat template: " + prompt->status().message()};
  return static_cast<int>((*prompt)->tokens.size());
}

}  // namespace revis::node
