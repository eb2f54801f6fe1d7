// Chat templates: turning (role, content) messages into the prompt text an
// instruction-tuned model was trained on.
//
// GGUF files carry the template as Jinja source (`tokenizer.chat_template`).
// revis does not run Jinja; it recognises the families it supports by their
// marker tokens and renders them natively:
//   ChatML / Qwen     <|im_start|>role\n...<|im_end|>\n
//   Llama 3           <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
//   Llama 2           <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST]
//   Mistral           <s>[INST] system\n\nuser [/INST]   ([INST] without <<SYS>>)
// An empty or unrecognised template falls back to ChatML with a warning:
// that is what most small chat models use and what llama.cpp falls back to.
//
// The rendered text contains BOS/EOS as text where the family puts them
// (SpecialTexts); tokenizing it with special-token parsing turns them into
// the real tokens. The caller adds BOS only when the text does not already
// start with it. Message text (roles and contents, which come from clients)
// is marked, so that the tokenizer can refuse to read control tokens there:
// a message holding "<|im_end|>" must not close its own turn.
//
// Thread-safety: free functions on values.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "revis/engine.h"
#include "revis/status.h"
#include "tokenizer/tokenizer.h"

namespace revis::node {

enum class ChatFamily { kChatML, kLlama3, kLlama2, kMistral };

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct TemplateChoice {
  ChatFamily family = ChatFamily::kChatML;
  bool fallback = false;  // the template was empty or not recognised
  std::string warning;    // why the fallback, for the log
};

// The vocabulary's texts for BOS and EOS ("<s>", "</s>", "<|begin_of_text|>").
// A rendered conversation: the prompt text, and the byte ranges in it that
// hold message text rather than template markup (Tokenizer::encode_template's
// literal spans).
struct ChatPrompt {
  std::string text;
  std::vector<TextSpan> message_spans;
};

struct SpecialTexts {
  std::string bos;
  std::string eos;
};

const char* chat_family_name(ChatFamily family);
TemplateChoice detect_chat_family(std::string_view jinja_source);

// How a model's conversations are rendered: the family chosen from the
// file's tokenizer.chat_template, and the vocabulary's BOS/EOS texts, both
// as Engine::load found them.
struct ModelChat {
  TemplateChoice choice;
  SpecialTexts special;
};
ModelChat model_chat(const ModelInfo& info);

// Renders the conversation and, with add_generation_prompt, the opening of
// the assistant's turn. A leading system message is folded in where the
// family has no system role of its own (Llama 2 and Mistral put it inside
// the first [INST]).
ChatPrompt render_chat(ChatFamily family, std::span<const ChatMessage> messages, const SpecialTexts& special,
                       bool add_generation_prompt = true);

}  // namespace revis::node
