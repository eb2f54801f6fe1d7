#include "node/job_prompt.h"

namespace revis::node {

Result<JobPrompt> job_prompt_tokens(const LoadedModel& model, const JobSpec& spec) {
  // Control-token texts in the template's markup (and in a raw prompt
  // outside its literal spans: a raw task's own template text, or an
  // OpenAI completion prompt, which the client writes whole) become the
  // real tokens; in message text and a raw task's arguments they stay text,
  // so that a client cannot end a turn or open another role's.
  if (spec.raw)
    return JobPrompt{chat_prompt_tokens(*model.engine, model.chat.special, {spec.prompt, spec.prompt_literals})};
  auto prompt = render_chat(model.chat, spec.messages, spec.chat_options);
  if (!prompt.ok()) return prompt.status();
  return JobPrompt{chat_prompt_tokens(*model.engine, model.chat.special, *prompt),
                   model.chat.reasoning && prompt_opens_reasoning(prompt->text, *model.chat.reasoning)};
}

}  // namespace revis::node
