#include "chat/chat_template.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include "chat/generic_tool_prompt.h"
#include "jinja/chat_template.h"

namespace revis::node {

const char* const kDefaultChatTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

namespace {

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

// The message texts a render splices in, and the placeholder that stands for
// each: "RVS" + a random tag + the index + "Z", letters and digits only, so
// that filters such as trim, tojson or escaping leave it whole.
class Placeholders {
 public:
  explicit Placeholders(std::span<const ChatMessage> messages) {
    std::random_device rd;
    std::ostringstream tag;
    tag << "RVS" << std::hex << ((uint64_t{rd()} << 32) | rd()) << "Q";
    tag_ = tag.str();
    for (const ChatMessage& m : messages) texts_.push_back(m.content);
  }

  // The placeholder for message i, carrying the text's outer whitespace.
  std::string stand_in(size_t i) const {
    const std::string& t = texts_[i];
    const size_t b = t.find_first_not_of(kWhitespace);
    if (b == std::string::npos) return t;  // blank text: nothing a tokenizer could misread
    const size_t e = t.find_last_not_of(kWhitespace) + 1;
    return t.substr(0, b) + tag_ + std::to_string(i) + "Z" + t.substr(e);
  }

  // Replaces every placeholder in `rendered` with its text's core (the
  // whitespace around it stayed where the template put it).
  ChatPrompt splice(const std::string& rendered) const {
    ChatPrompt out;
    size_t pos = 0;
    for (;;) {
      const size_t at = rendered.find(tag_, pos);
      if (at == std::string::npos) break;
      size_t digits = at + tag_.size();
      size_t end = digits;
      while (end < rendered.size() && rendered[end] >= '0' && rendered[end] <= '9') ++end;
      if (end == digits || end >= rendered.size() || rendered[end] != 'Z' || end - digits > 9) {
        out.text.append(rendered, pos, digits - pos);  // not ours after all (cannot happen with a random tag)
        pos = digits;
        continue;
      }
      const size_t i = std::stoul(rendered.substr(digits, end - digits));
      out.text.append(rendered, pos, at - pos);
      if (i < texts_.size()) {
        const std::string& t = texts_[i];
        const size_t b = t.find_first_not_of(kWhitespace);
        const std::string_view core = std::string_view(t).substr(b, t.find_last_not_of(kWhitespace) + 1 - b);
        out.message_spans.push_back({out.text.size(), out.text.size() + core.size()});
        out.text += core;
      }
      pos = end + 1;
    }
    out.text.append(rendered, pos);
    return out;
  }

 private:
  std::string tag_;
  std::vector<std::string> texts_;
};

// Whether `tpl` renders a system message: it may raise on one (Gemma) or
// leave it out.
bool renders_system_role(const jinja::ChatTemplate& tpl, const SpecialTexts& special) {
  static constexpr std::string_view kProbe = "RVSsystemZ";
  jinja::ChatTemplateInput input;
  input.messages = nlohmann::ordered_json::array({{{"role", "system"}, {"content", kProbe}}, {{"role", "user"}, {"content", "Hi"}}});
  input.bos_token = special.bos;
  input.eos_token = special.eos;
  auto text = tpl.render(input);
  return text.ok() && text->find(kProbe) != std::string::npos;
}

}  // namespace

Result<ModelChat> model_chat(const ModelInfo& info, std::string_view override_source, std::string_view override_origin) {
  ModelChat chat;
  chat.special = {info.bos.text, info.eos.text};
  std::string_view source;
  if (!override_source.empty()) {
    source = override_source;
    chat.origin = override_origin.empty() ? "--chat-template" : std::string(override_origin);
  } else if (!info.chat_template.empty()) {
    source = info.chat_template;
    chat.origin = "model";
  } else {
    source = kDefaultChatTemplate;
    chat.origin = "default ChatML";
    chat.warning = "the model has no tokenizer.chat_template; using ChatML (set --chat-template FILE to choose one)";
  }
  auto tpl = jinja::ChatTemplate::parse(source);
  if (!tpl.ok()) return Status::error("chat template (" + chat.origin + "): " + tpl.status().message());
  chat.tpl = std::make_shared<const jinja::ChatTemplate>(std::move(*tpl));
  chat.reasoning = reasoning_tags(source);
  chat.tool_format = tool_format(source);
  chat.system_role = renders_system_role(*chat.tpl, chat.special);
  return chat;
}

Status chat_kwargs_from_request(const nlohmann::json& body, ChatOptions& options) {
  if (auto k = body.find("chat_template_kwargs"); k != body.end() && !k->is_null()) {
    if (!k->is_object()) return Status::error("chat_template_kwargs must be an object");
    for (const auto& [key, value] : k->items()) options.kwargs[key] = value;
  }
  if (auto t = body.find("enable_thinking"); t != body.end() && !t->is_null()) {
    if (!t->is_boolean()) return Status::error("enable_thinking must be a boolean");
    options.kwargs["enable_thinking"] = t->get<bool>();
  }
  if (auto e = body.find("reasoning_effort"); e != body.end() && !e->is_null()) {
    if (!e->is_string()) return Status::error("reasoning_effort must be a string (low, medium, high)");
    options.kwargs["reasoning_effort"] = e->get<std::string>();
  }
  return {};
}

Result<std::string> read_chat_template_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open the chat template file");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return Status::error(path + ": the chat template file is empty");
  return text.str();
}

std::vector<int32_t> chat_prompt_tokens(const Engine& engine, const SpecialTexts& special, const ChatPrompt& prompt) {
  const bool has_bos_text = !special.bos.empty() && prompt.text.rfind(special.bos, 0) == 0;
  return engine.tokenize_template(prompt.text, engine.add_bos_default() && !has_bos_text, prompt.message_spans);
}

std::vector<int32_t> shown_special_tokens(const Engine& engine, const ModelChat& chat) {
  std::vector<std::string_view> texts;
  if (chat.tool_format) texts = tool_markers(*chat.tool_format);
  if (chat.reasoning) {
    texts.push_back(chat.reasoning->open);
    texts.push_back(chat.reasoning->close);
  }
  std::vector<int32_t> ids;
  for (std::string_view text : texts)
    if (auto id = engine.find_token(text); id && engine.is_control(*id)) ids.push_back(*id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

Status check_no_control_text(const Engine& engine, const nlohmann::ordered_json& value, const std::string& field) {
  const std::string text = value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  for (int32_t id : engine.tokenize(text, false, true))
    if (engine.is_control(id))
      return Status::error(field + " holds the text of the control token \"" + engine.token_text(id) +
                           "\", which the chat template would write as the token itself");
  return {};
}

Result<ChatPrompt> render_chat(const ModelChat& chat, std::span<const ChatMessage> messages,
                               const ChatOptions& options, const ToolRequest& tool_use) {
  std::vector<ChatMessage> generic;
  if (!chat.tool_format) {
    generic = generic_tool_conversation(messages, options.tools ? &*options.tools : nullptr, tool_use, chat.system_role);
    messages = generic;
  }
  const Placeholders placeholders(messages);
  jinja::ChatTemplateInput input;
  for (size_t i = 0; i < messages.size(); ++i) {
    nlohmann::ordered_json m = {{"role", messages[i].role}, {"content", placeholders.stand_in(i)}};
    for (const auto& [key, value] : messages[i].fields.items()) m[key] = value;
    input.messages.push_back(std::move(m));
  }
  if (chat.tool_format) input.tools = options.tools;  // generic: the tools are in the messages
  input.add_generation_prompt = options.add_generation_prompt;
  input.bos_token = chat.special.bos;
  input.eos_token = chat.special.eos;
  input.extra = options.kwargs;
  auto text = chat.tpl->render(input);
  if (!text.ok()) return text.status();
  return placeholders.splice(*text);
}

}  // namespace revis::node
