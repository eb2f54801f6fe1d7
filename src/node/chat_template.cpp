#include "node/chat_template.h"

namespace revis::node {
namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\n\r";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string render_chatml(std::span<const ChatMessage> messages, bool gen) {
  std::string out;
  for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

// Llama 3's template trims every message and opens with BOS.
std::string render_llama3(std::span<const ChatMessage> messages, const SpecialTexts& sp, bool gen) {
  std::string out = sp.bos;
  for (const ChatMessage& m : messages)
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + std::string(trim(m.content)) + "<|eot_id|>";
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Llama 2 and Mistral: every user turn is "[INST] ... [/INST]", the answer
// follows and ends with EOS. Llama 2 opens every turn with BOS and wraps the
// system prompt in <<SYS>>; Mistral opens once and prefixes the system
// prompt to the first user message.
std::string render_inst(std::span<const ChatMessage> messages, const SpecialTexts& sp, bool llama2) {
  std::string system;
  size_t first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    system = std::string(trim(messages[0].content));
    first = 1;
  }
  std::string out = llama2 ? "" : sp.bos;
  bool system_pending = !system.empty();
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant") {
      out += (llama2 ? " " : "") + std::string(trim(m.content)) + (llama2 ? " " : "") + sp.eos;
      continue;
    }
    // user (and any later system message, which these families cannot place
    // anywhere else) becomes an instruction turn.
    std::string content(trim(m.content));
    if (system_pending) {
      content = llama2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content : system + "\n\n" + content;
      system_pending = false;
    }
    out += (llama2 ? sp.bos : "") + "[INST] " + content + " [/INST]";
  }
  if (system_pending)  // a system message alone still reaches the model
    out += (llama2 ? sp.bos + "[INST] <<SYS>>\n" + system + "\n<</SYS>>\n\n [/INST]" : "[INST] " + system + " [/INST]");
  return out;
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

std::string render_chat(ChatFamily family, std::span<const ChatMessage> messages, const SpecialTexts& special,
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
