// Chat templates the Hugging Face way: renders a model's
// `tokenizer.chat_template` (Jinja source) exactly as transformers'
// apply_chat_template does with Python's jinja2 — an immutable sandbox,
// trim_blocks and lstrip_blocks, loop controls, {% generation %} blocks,
// tojson without ASCII or HTML escaping, and the globals raise_exception()
// and strftime_now(). The variables are `messages`, `tools` (only when
// given), `add_generation_prompt`, `bos_token`, `eos_token` and any extra
// keyword arguments (`enable_thinking`, ...).
//
// A template is parsed once (ChatTemplate::parse) and rendered any number of
// times; render() is const and may run on several threads at once. Errors are
// Status values: a syntax error names the line, a template that calls
// raise_exception() fails with exactly its message, and a template that
// exceeds the Limits (depth, steps, sizes) fails instead of hanging.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "jinja/interpreter.h"
#include "revis/status.h"

namespace revis::jinja {

struct Template;

struct ChatTemplateInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  std::optional<nlohmann::ordered_json> tools;  // absent: `tools` is undefined in the template
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more variables: enable_thinking, ...
  std::string now;  // ISO 8601 local time strftime_now() formats; empty: the clock's
};

// The input object of `revis template --input` (and of the shared test
// cases): messages, optional tools, add_generation_prompt, bos_token,
// eos_token, optional kwargs (the extra variables) and now.
Result<ChatTemplateInput> chat_input_from_json(const nlohmann::ordered_json& j);

class ChatTemplate {
 public:
  static Result<ChatTemplate> parse(std::string_view source, const Limits& limits = {});
  Result<std::string> render(const ChatTemplateInput& input) const;

 private:
  std::shared_ptr<const Template> tpl_;
  Limits limits_;
};

// parse + render in one call.
Result<std::string> render_chat_template(std::string_view source, const ChatTemplateInput& input,
                                         const Limits& limits = {});

}  // namespace revis::jinja
