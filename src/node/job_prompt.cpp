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
  // Tools and tool-call arguments reach the prompt as the template writes
  // them, so they may not hold control-token texts at all.
  if (spec.chat_options.tools)
    if (Status s = check_no_control_text(*model.engine, *spec.chat_options.tools, "tools"); !s.ok()) return s;
  for (size_t i = 0; i < spec.messages.size(); ++i)
    if (!spec.messages[i].fields.empty())
      if (Status s = check_no_control_text(*model.engine, spec.messages[i].fields, "messages[" + std::to_string(i) + "]");
          !s.ok())
        return s;
  auto prompt = render_chat(model.chat, spec.messages, spec.chat_options, spec.tool_use);
  if (!prompt.ok()) return prompt.status();
  return JobPrompt{chat_prompt_tokens(*model.engine, model.chat.special, *prompt),
                   model.chat.reasoning && prompt_opens_reasoning(prompt->text, *model.chat.reasoning)};
}

}  // namespace revis::node
