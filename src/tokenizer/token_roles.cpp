// Which tokens play which role beyond their stored type: end of turn /
// message, fill-in-the-middle markers, end of generation, and per-model
// whitespace stripping. These follow llama.cpp, whose rules change both the
// special-token split (a token forced to "control" is no longer matched in
// plain text) and when generation stops.
#include <algorithm>
#include <cctype>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer_impl.h"

namespace revis::tok {
namespace {

// Tokens llama.cpp recognises by their text when the metadata does not name
// them. The first text of the list that the vocabulary has takes the role
// (llama.cpp takes whichever its hash map yields first) and, if its type said
// otherwise, becomes a control token.
struct Role {
  const char* id_key;
  const char* alt_key;  // deprecated key for the same id, or nullptr
  std::vector<std::string_view> texts;
  bool end_of_generation;
  int32_t Tokenizer::Impl::*slot = nullptr;  // where the id is kept, if anywhere
};

const std::vector<Role>& roles() {
  static const std::vector<Role> list = {
      {"eot_token_id",
       nullptr,
       {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
        "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>"},
       true,
       &Tokenizer::Impl::eot},
      {"eom_token_id", nullptr, {"<|eom_id|>"}, true, &Tokenizer::Impl::eom},
      {"fim_pre_token_id",
       "prefix_token_id",
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
        "<|code_prefix|>", "<|prefix|>"},
       false},
      {"fim_suf_token_id",
       "suffix_token_id",
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
        "<|code_suffix|>", "<|suffix|>"},
       false},
      {"fim_mid_token_id",
       "middle_token_id",
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
        "<|code_middle|>", "<|middle|>"},
       false},
      {"fim_pad_token_id", nullptr, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}, true},
      {"fim_rep_token_id",
       nullptr,
       {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
       true},
      {"fim_sep_token_id", nullptr, {"<|file_sep|>"}, true},
  };
  return list;
}

// Texts that end generation wherever they appear in the vocabulary.
const std::vector<std::string_view>& eog_texts() {
  static const std::vector<std::string_view> list = {
      "<|eot_id|>", "<|im_end|>", "<|end|>",          "<|return|>",           "<|call|>",
      "<|flush|>",  "<|calls|>",  "<end_of_turn>",    "<|endoftext|>",        "</s>",
      "<|eom_id|>", "<EOT>",      "_<EOT>",           "<|end_of_text|>",      "<end_of_utterance>",
      "<eos>",      "<turn|>",    "<|tool_response>", "<｜end▁of▁sentence｜>"};
  return list;
}

}  // namespace

void assign_roles(const gguf::GgufFile& file, Tokenizer::Impl& t) {
  Vocab& vocab = t.vocab;
  const int32_t n = vocab.size();
  t.eog.assign(n, false);
  for (const Role& role : roles()) {
    // eot/eom ids from the metadata were read (and checked) by load().
    int32_t id = role.slot ? t.*role.slot : -1;
    for (const char* k : {role.id_key, role.alt_key}) {
      if (!k || id >= 0 || !file.find(std::string(kKeyPrefix) + k)) continue;
      // A bad optional id is not fatal: llama.cpp ignores it too.
      if (Status s = read_token_id(file, k, n, id); !s.ok()) {
        t.warnings.push_back(s.message() + "; ignored");
      }
    }
    // By text, in list order: for Llama 3 "<|eot_id|>" rather than
    // "<|end_of_text|>", for Qwen "<|im_end|>" rather than "<|endoftext|>".
    for (size_t i = 0; id < 0 && i < role.texts.size(); ++i) {
      id = vocab.find(role.texts[i]);
      if (id >= 0) vocab.attr[id] |= kAttrControl;
    }
    if (role.slot) t.*role.slot = id;
    if (id >= 0 && role.end_of_generation) t.eog[id] = true;
  }
  for (std::string_view text : eog_texts()) {
    if (const int32_t id = vocab.find(text); id >= 0) {
      t.eog[id] = true;
      vocab.attr[id] |= kAttrControl;
    }
  }
  if (t.eos >= 0) t.eog[t.eos] = true;

  // gpt-oss style vocabularies end a turn with <|return|>/<|call|>; their
  // <|end|> only ends a message. Gemma-style ones use </s> as plain text.
  auto eog_with_text = [&](std::string_view text) {
    const int32_t id = vocab.find(text);
    return id >= 0 && t.eog[id] ? id : -1;
  };
  const int32_t end_id = eog_with_text("<|end|>");
  if (end_id >= 0 && ((eog_with_text("<|return|>") >= 0 && eog_with_text("<|call|>") >= 0) ||
                      (eog_with_text("<|calls|>") >= 0 && eog_with_text("<|flush|>") >= 0))) {
    t.eog[end_id] = false;
    vocab.attr[end_id] = kAttrUserDefined;
  }
  const int32_t s_id = eog_with_text("</s>");
  if (s_id >= 0 && eog_with_text("<|tool_response>") >= 0) {
    t.eog[s_id] = false;
    vocab.attr[s_id] = kAttrNormal;
  }
}

void apply_model_token_rules(const gguf::GgufFile& file, Tokenizer::Impl& t) {
  Vocab& vocab = t.vocab;
  auto name = file.get_string("general.name");
  std::string lower = name.ok() ? name.value() : std::string();
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });

  // Phi-3's special tokens swallow the whitespace that follows them, except
  // <unk>, <s> and <|endoftext|> (llama.cpp, keyed on general.name).
  if (lower.find("phi-3") != std::string::npos || lower.find("phi3") != std::string::npos) {
    for (int32_t id : t.specials.ids()) vocab.attr[id] |= kAttrRstrip;
    if (int32_t id = vocab.find("</s>"); id >= 0) vocab.attr[id] |= kAttrRstrip;
    for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (int32_t id = vocab.find(text); id >= 0) vocab.attr[id] &= ~kAttrRstrip;
    }
  }
}

}  // namespace revis::tok
