// Chat template detection from typical tokenizer.chat_template sources, and
// rendering of each family.
#include <gtest/gtest.h>

#include "node/chat_template.h"

namespace revis::node {
namespace {

// Abridged but characteristic tokenizer.chat_template values.
const char* kQwen =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
const char* kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
const char* kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set system_message = messages[0]['content'] %}{% endif %}"
    "{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = "
    "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% endif %}{% if message['role'] == "
    "'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
const char* kMistral =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}";
const char* kGemma = "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ message['role'] }}{% endfor %}";

const SpecialTexts kSpm{"<s>", "</s>"};

TEST(ChatTemplate, DetectsFamilies) {
  EXPECT_EQ(detect_chat_family(kQwen).family, ChatFamily::kChatML);
  EXPECT_FALSE(detect_chat_family(kQwen).fallback);
  EXPECT_EQ(detect_chat_family(kLlama3).family, ChatFamily::kLlama3);
  EXPECT_EQ(detect_chat_family(kLlama2).family, ChatFamily::kLlama2);
  EXPECT_EQ(detect_chat_family(kMistral).family, ChatFamily::kMistral);
  for (const char* unknown : {"", kGemma}) {
    TemplateChoice c = detect_chat_family(unknown);
    EXPECT_EQ(c.family, ChatFamily::kChatML);
    EXPECT_TRUE(c.fallback);
    EXPECT_FALSE(c.warning.empty());
  }
}

TEST(ChatTemplate, ChatML) {
  const std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
  EXPECT_EQ(render_chat(ChatFamily::kChatML, m, {}).text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!"
            "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(ChatFamily::kChatML, std::vector<ChatMessage>{{"user", "x"}}, {}, false).text,
            "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, Llama3) {
  const std::vector<ChatMessage> m = {{"system", " Be brief. "}, {"user", "Hi\n"}};
  EXPECT_EQ(render_chat(ChatFamily::kLlama3, m, {"<|begin_of_text|>", "<|end_of_text|>"}).text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llama2) {
  const std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
  EXPECT_EQ(render_chat(ChatFamily::kLlama2, m, kSpm).text,
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye [/INST]");
  EXPECT_EQ(render_chat(ChatFamily::kLlama2, std::vector<ChatMessage>{{"user", " Hi "}}, kSpm).text, "<s>[INST] Hi [/INST]");
}

TEST(ChatTemplate, Mistral) {
  const std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
  EXPECT_EQ(render_chat(ChatFamily::kMistral, m, kSpm).text, "<s>[INST] Be brief.\n\nHi [/INST]Hello!</s>[INST] Bye [/INST]");
}

// Every family marks exactly the message text (roles and contents, trimmed
// where the family trims), never its own markup, BOS or EOS.
TEST(ChatTemplate, MessageSpansCoverMessageTextOnly) {
  const std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
  for (ChatFamily family : {ChatFamily::kChatML, ChatFamily::kLlama3, ChatFamily::kLlama2, ChatFamily::kMistral}) {
    const ChatPrompt p = render_chat(family, m, kSpm);
    std::string marked, unmarked;
    size_t at = 0;
    for (const TextSpan& s : p.message_spans) {
      ASSERT_LE(at, s.begin) << chat_family_name(family);
      ASSERT_LT(s.begin, s.end) << chat_family_name(family);
      ASSERT_LE(s.end, p.text.size()) << chat_family_name(family);
      unmarked += p.text.substr(at, s.begin - at);
      marked += p.text.substr(s.begin, s.end - s.begin) + "|";
      at = s.end;
    }
    unmarked += p.text.substr(at);
    const bool roles = family == ChatFamily::kChatML || family == ChatFamily::kLlama3;
    EXPECT_EQ(marked, roles ? "system|Be brief.|user|Hi|assistant|Hello!|user|Bye|" : "Be brief.|Hi|Hello!|Bye|")
        << chat_family_name(family);
    for (const char* text : {"Be brief.", "Hi", "Hello!", "Bye"})
      EXPECT_EQ(unmarked.find(text), std::string::npos) << chat_family_name(family) << ": " << text;
  }
}

TEST(ChatTemplate, Names) {
  EXPECT_STREQ(chat_family_name(ChatFamily::kChatML), "chatml");
  EXPECT_STREQ(chat_family_name(ChatFamily::kLlama3), "llama3");
  EXPECT_STREQ(chat_family_name(ChatFamily::kLlama2), "llama2");
  EXPECT_STREQ(chat_family_name(ChatFamily::kMistral), "mistral");
}

}  // namespace
}  // namespace revis::node
