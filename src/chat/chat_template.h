// Chat templates: turning a conversation into the prompt text an
// instruction-tuned model was trained on, with the model's own Jinja
// template (`tokenizer.chat_template`, rendered by src/jinja exactly as
// Hugging Face's apply_chat_template does). `--chat-template FILE` (and the
// config's chat_template key) replaces the file's template; a model without
// one gets ChatML, with a warning for the log.
//
// Security: message text comes from clients, and a message holding
// "<|im_end|>" must not close its own turn. Jinja output carries no
// provenance, so render_chat() renders with every message text replaced by a
// unique placeholder (keeping the text's leading and trailing whitespace
// around it, so a template's `trim` acts as on the text), then splices the
// texts in and records where they landed (ChatPrompt::message_spans):
// Engine::tokenize_template matches control tokens only outside them.
// A template that inspects the text itself (`'</think>' in content`) sees
// the placeholder, never the text.
//
// The rendered text may hold BOS/EOS as text where the template writes
// them; the caller adds BOS only when the text does not already start with it.
//
// Thread-safety: ModelChat is immutable once built; render_chat() may run on
// several threads at once.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/reasoning_split.h"
#include "chat/tool_calls.h"
#include "revis/engine.h"
#include "revis/status.h"
#include "revis/text_span.h"

namespace revis::jinja {
class ChatTemplate;
}

namespace revis::node {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool" (as the API and the catalogue validated it)
  std::string content;
  // More of the message for the template, as the API validated it: an
  // assistant's tool_calls (arguments as objects) and reasoning_content, a
  // tool result's tool_call_id and name.
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
};

// A rendered conversation: the prompt text, and the byte ranges in it that
// hold message text rather than template markup (Engine::tokenize_template's
// literal spans).
struct ChatPrompt {
  std::string text;
  std::vector<TextSpan> message_spans;
};

// The vocabulary's texts for BOS and EOS ("<s>", "</s>", "<|begin_of_text|>").
struct SpecialTexts {
  std::string bos;
  std::string eos;
};

// What shapes one render beyond the messages.
struct ChatOptions {
  bool add_generation_prompt = true;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // enable_thinking, reasoning_effort, ...
  // The request's tools (OpenAI's array) as the template's `tools`; absent:
  // undefined there, and the output is not read for tool calls.
  std::optional<nlohmann::ordered_json> tools;
};

// The ChatML template used when a model has none.
extern const char* const kDefaultChatTemplate;

// How a model's conversations are rendered.
struct ModelChat {
  std::shared_ptr<const jinja::ChatTemplate> tpl;
  std::string origin;   // "model", the override file's path, or "default ChatML"
  std::string warning;  // non-empty: say it in the log (the default was chosen)
  SpecialTexts special;
  std::optional<ReasoningTags> reasoning;  // the template's thinking tags: answers are split (reasoning_split.h)
  std::optional<ToolFormat> tool_format;   // how the template writes tool calls (tool_calls.h)
  // Whether the template renders a system message (Gemma's raise on one).
  // Without tool_format, calls take the generic format, whose section on
  // the tools goes there, or else into the first user message.
  bool system_role = true;
  // The format the answer's calls are read in: the template's, or generic.
  ToolFormat tool_calls_format() const { return tool_format.value_or(ToolFormat::kGeneric); }
};

// The template of `info` (Engine::load's), or `override_source` when it is
// non-empty (`override_origin` names it, e.g. the file's path). Fails when
// the chosen template does not parse, naming its origin.
Result<ModelChat> model_chat(const ModelInfo& info, std::string_view override_source = {},
                             std::string_view override_origin = {});

// The template variables an OpenAI chat request sets: chat_template_kwargs
// (an object, as llama-server takes it), and enable_thinking and
// reasoning_effort given at the top level. Fails naming the field.
Status chat_kwargs_from_request(const nlohmann::json& body, ChatOptions& options);

// Reads a --chat-template file; the error names the file.
Result<std::string> read_chat_template_file(const std::string& path);

// A rendered prompt as tokens: control-token texts parsed only outside the
// message spans, BOS as the model asks unless the text already opens with it.
std::vector<int32_t> chat_prompt_tokens(const Engine& engine, const SpecialTexts& special, const ChatPrompt& prompt);

// The control tokens of `engine` whose text a chat's output must keep for
// it to be read: the tool-call markers and thinking tags of `chat`
// (GenerateOptions::shown_tokens), ascending.
std::vector<int32_t> shown_special_tokens(const Engine& engine, const ModelChat& chat);

// Client JSON that a template writes into the prompt as it is (tools,
// tool-call arguments) must hold no control token's text: unlike message
// text it cannot be kept literal. The error names `field` and the token.
Status check_no_control_text(const Engine& engine, const nlohmann::ordered_json& value, const std::string& field);

// Renders the conversation through the template. A template without
// tool-call syntax gets the conversation in the generic format
// (generic_tool_prompt.h: the tools as `tool_use` allows them, earlier calls
// and results as message text) and no `tools`. Fails with the template's
// own message when it raises (raise_exception), or a render error.
Result<ChatPrompt> render_chat(const ModelChat& chat, std::span<const ChatMessage> messages,
                               const ChatOptions& options = {}, const ToolRequest& tool_use = {});

}  // namespace revis::node
