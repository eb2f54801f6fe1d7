#include "node/job_prompt.h"

namespace revis::node {

std::vector<int32_t> job_prompt_tokens(const LoadedModel& model, const JobSpec& spec) {
  // Control-token texts in the template's markup (and in a raw prompt
  // outside its literal spans: a raw task's own template text, or an
  // OpenAI completion prompt, which the client writes whole) become the
  // real tokens; in message text and a raw task's arguments they stay text,
  // so that a client cannot end a turn or open another role's. BOS is added
  // only if the template did not already write it.
  const ChatPrompt prompt = spec.raw ? ChatPrompt{spec.prompt, spec.prompt_literals}
                                     : render_chat(model.chat.family, spec.messages, model.special);
  const bool has_bos_text = !model.special.bos.empty() && prompt.text.rfind(model.special.bos, 0) == 0;
  return model.engine->tokenizer().encode_template(prompt.text, model.engine->add_bos_default() && !has_bos_text,
                                                   prompt.message_spans);
}

}  // namespace revis::node
