#include "node/chat_template.h"

namespace revis::node {
namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\n\r";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Accumulates a prompt, recording where message text (as opposed to the
// template's own markup) lands.
class PromptBuilder {
 public:
  explicit PromptBuilder(std::string_view markup = {}) { prompt_.text = markup; }
  PromptBuilder& markup(std::string_view text) {
    prompt_.text += text;
    return *this;
  }
  PromptBuilder& message_text(std::string_view text) {
    if (!text.empty()) prompt_.message_spans.push_back({prompt_.text.size(), prompt_.text.size() + text.size()});
    prompt_.text += text;
    return *this;
  }
  ChatPrompt take() { return std::move(prompt_); }

 private:
  ChatPrompt prompt_;
};

ChatPrompt render_chatml(std::span<const ChatMessage> messages, bool gen) {
  PromptBuilder out;
  for (const ChatMessage& m : messages)
    out.markup("<|im_start|>").message_text(m.role).markup("\n").message_text(m.content).markup("<|im_end|>\n");
  if (gen) out.markup("<|im_start|>assistant\n");
  return out.take();
}

// Llama 3's template trims every message and opens with BOS.
ChatPrompt render_llama3(std::span<const ChatMessage> messages, const SpecialTexts& sp, bool gen) {
  PromptBuilder out(sp.bos);
  for (const ChatMessage& m : messages)
    out.markup("<|start_header_id|>")
        .message_text(m.role)
        .markup("<|end_header_id|>\n\n")
        .message_text(trim(m.content))
        .markup("<|eot_id|>");
  if (gen) out.markup("<|start_header_id|>assistant<|end_header_id|>\n\n");
  return out.take();
}

// Llama 2 and Mistral: every user turn is "[INST] ... [/INST]", the answer
// follows and ends with EOS. Llama 2 opens every turn with BOS and wraps the
// system prompt in <<SYS>>; Mistral opens once and prefixes the system
// prompt to the first user message.
ChatPrompt render_inst(std::span<const ChatMessage> messages, const SpecialTexts& sp, bool llama2) {
  std::string_view system;
  size_t first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    system = trim(messages[0].content);
    first = 1;
  }
  auto add_system = [&](PromptBuilder& out) {
    if (llama2) {
      out.markup("<<SYS>>\n").message_text(system).markup("\n<</SYS>>\n\n");
    } else {
      out.message_text(system).markup("\n\n");
    }
  };
  PromptBuilder out(llama2 ? "" : sp.bos);
  bool system_pending = !system.empty();
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant") {
      out.markup(llama2 ? " " : "").message_text(trim(m.content)).markup(llama2 ? " " : "").markup(sp.eos);
      continue;
    }
    // user (and any later system message, which these families cannot place
    // anywhere else) becomes an instruction turn.
    out.markup(llama2 ? sp.bos : "").markup("[INST] ");
    if (system_pending) {
      add_system(out);
      system_pending = false;
    }
    out.message_text(trim(m.content)).markup(" [/INST]");
  }
  if (system_pending) {  // a system message alone still reaches the model
    out.markup(llama2 ? sp.bos : "").markup("[INST] ");
    if (llama2) {
      add_system(out);
      out.markup(" [/INST]");
    } else {
      out.message_text(system).markup(" [/INST]");
    }
  }
  return out.take();
}

}  // namespace

const char* chat_family_name(ChatFamily family) {
  switch (family) {
    case ChatFamily::kChatML: return "chatml";
    case ChatFamily::kLlama3: return "llama3";
    case ChatFamily::kLlama2: return "llama2";
    case ChatFamily::kMistral: return "mistral";
  }
  return "chatml";
}

TemplateChoice detect_chat_family(std::string_view src) {
  TemplateChoice c;
  if (src.find("<|im_start|>") != std::string_view::npos) return c;
  if (src.find("<|start_header_id|>") != std::string_view::npos) {
    c.family = ChatFamily::kLlama3;
    return c;
  }
  if (src.find("[INST]") != std::string_view::npos) {
    c.family = src.find("<<SYS>>") != std::string_view::npos ? ChatFamily::kLlama2 : ChatFamily::kMistral;
    return c;
  }
  c.fallback = true;
  c.warning = src.empty() ? "the model has no tokenizer.chat_template; using ChatML"
                          : "unrecognised tokenizer.chat_template; using ChatML";
  return c;
}

ModelChat model_chat(const ModelInfo& info) {
  return {detect_chat_family(info.chat_template), {info.bos.text, info.eos.text}};
}

ChatPrompt render_chat(ChatFamily family, std::span<const ChatMessage> messages, const SpecialTexts& special,
                       bool add_generation_prompt) {
  switch (family) {
    case ChatFamily::kLlama3: return render_llama3(messages, special, add_generation_prompt);
    case ChatFamily::kLlama2: return render_inst(messages, special, true);
    case ChatFamily::kMistral: return render_inst(messages, special, false);
    case ChatFamily::kChatML: break;
  }
  return render_chatml(messages, add_generation_prompt);
}

}  // namespace revis::node
