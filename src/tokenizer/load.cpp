// Tokenizer::from_gguf: reads and validates the tokenizer.ggml.* metadata.
//
// Besides the stored arrays, a few rules of llama.cpp are reproduced because
// they change token ids or end-of-generation detection: default special ids
// and BOS policy per vocabulary type, recognising end-of-turn / FIM tokens by
// their text (and treating them as control tokens), and Phi-3's habit of
// eating whitespace after its special tokens.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "gguf/gguf.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace revis {
namespace tok {

uint32_t attr_from_token_type(int64_t type) {
  switch (type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return kAttrUndefined;
  }
}

}  // namespace tok

namespace {

constexpr const char* kPrefix = "tokenizer.ggml.";

std::string key(const char* name) { return std::string(kPrefix) + name; }

bool parse_byte_token(const std::string& text, uint8_t& byte) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') return false;
  const int hi = hex(text[3]), lo = hex(text[4]);
  if (hi < 0 || lo < 0) return false;
  byte = static_cast<uint8_t>(hi * 16 + lo);
  return true;
}

// Reads an optional token-id key. Absent: `id` keeps its default.
Status read_id(const gguf::GgufFile& file, const char* name, int32_t n_vocab, int32_t& id) {
  const std::string k = key(name);
  if (!file.find(k)) return {};
  auto v = file.get_int(k, -1);
  if (!v.ok()) return v.status();
  if (v.value() < 0 || v.value() >= n_vocab) {
    return Status::error(k + " = " + std::to_string(v.value()) + " is outside the vocabulary (0.." +
                         std::to_string(n_vocab - 1) + ")");
  }
  id = static_cast<int32_t>(v.value());
  return {};
}

Status read_bool(const gguf::GgufFile& file, const char* name, bool& value) {
  auto v = file.get_bool(key(name), value);
  if (!v.ok()) return v.status();
  value = v.value();
  return {};
}

// Tokens llama.cpp recognises by their text when the metadata does not name
// them. The first text of the list that the vocabulary has takes the role
// (llama.cpp takes whichever its hash map yields first) and, if its type said
// otherwise, becomes a control token.
struct Role {
  const char* id_key;
  const char* alt_key;  // deprecated key for the same id, or nullptr
  std::vector<std::string_view> texts;
  bool end_of_generation;
};

const std::vector<Role>& roles() {
  static const std::vector<Role> list = {
      {"eot_token_id", nullptr,
       {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
        "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>"},
       true},
      {"eom_token_id", nullptr, {"<|eom_id|>"}, true},
      {"fim_pre_token_id", "prefix_token_id",
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
        "<|code_prefix|>", "<|prefix|>"},
       false},
      {"fim_suf_token_id", "suffix_token_id",
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
        "<|code_suffix|>", "<|suffix|>"},
       false},
      {"fim_mid_token_id", "middle_token_id",
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
        "<|code_middle|>", "<|middle|>"},
       false},
      {"fim_pad_token_id", nullptr, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}, true},
      {"fim_rep_token_id", nullptr,
       {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}, true},
      {"fim_sep_token_id", nullptr, {"<|file_sep|>"}, true},
  };
  return list;
}

// Texts that end generation wherever they appear in the vocabulary.
const std::vector<std::string_view>& eog_texts() {
  static const std::vector<std::string_view> list = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
      "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>",
      "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>"};
  return list;
}

Status load_vocab(const gguf::GgufFile& file, tok::Vocab& vocab) {
  const std::string tokens_key = key("tokens");
  if (!file.find(tokens_key)) return Status::error(tokens_key + " is missing");
  auto tokens = file.get_string_array(tokens_key);
  if (!tokens.ok()) return tokens.status();
  const size_t n = tokens.value().size();
  if (n == 0) return Status::error(tokens_key + " is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2)) {
    return Status::error(tokens_key + " has " + std::to_string(n) + " entries, too many");
  }

  vocab.text = std::move(tokens.value());
  vocab.score.assign(n, 0.0f);
  vocab.attr.assign(n, tok::kAttrNormal);

  const std::string scores_key = key("scores");
  if (const gguf::Value* v = file.find(scores_key)) {
    const gguf::Array* arr = v->as_array();
    if (arr && !arr->items.empty() && arr->items[0].is_integer()) {
      auto ints = file.get_int_array(scores_key);
      if (!ints.ok()) return ints.status();
      vocab.score.clear();
      for (int64_t s : ints.value()) vocab.score.push_back(static_cast<float>(s));
    } else {
      auto floats = file.get_float_array(scores_key);
      if (!floats.ok()) return floats.status();
      vocab.score = std::move(floats.value());
    }
    if (vocab.score.size() != n) {
      return Status::error(scores_key + " has " + std::to_string(vocab.score.size()) +
                           " entries, expected one per token (" + std::to_string(n) + ")");
    }
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(vocab.score[i])) {
        return Status::error(scores_key + "[" + std::to_string(i) + "] is NaN");
      }
    }
  }

  const std::string types_key = key("token_type");
  if (file.find(types_key)) {
    auto types = file.get_int_array(types_key);
    if (!types.ok()) return types.status();
    if (types.value().size() != n) {
      return Status::error(types_key + " has " + std::to_string(types.value().size()) +
                           " entries, expected one per token (" + std::to_string(n) + ")");
    }
    for (size_t i = 0; i < n; ++i) vocab.attr[i] = tok::attr_from_token_type(types.value()[i]);
  }

  vocab.ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string& text = vocab.text[i];
    // An empty text could never be produced or matched; llama.cpp renames it.
    if (text.empty()) text = "[EMPTY_" + std::to_string(i) + "]";
    auto [it, inserted] = vocab.ids.emplace(text, static_cast<int32_t>(i));
    if (!inserted) {
      return Status::error(tokens_key + ": duplicate token '" + text + "' at ids " +
                           std::to_string(it->second) + " and " + std::to_string(i));
    }
    uint8_t byte = 0;
    if ((vocab.attr[i] & tok::kAttrByte) && !parse_byte_token(text, byte)) {
      return Status::error(tokens_key + "[" + std::to_string(i) + "] '" + text +
                           "' has type BYTE but is not of the form <0xNN>");
    }
  }
  return {};
}

std::string render_piece(const Tokenizer::Impl& t, int32_t id) {
  const std::string& text = t.vocab.text[id];
  const uint32_t attr = t.vocab.attr[id];
  if (attr & (tok::kAttrControl | tok::kAttrUnknown | tok::kAttrUserDefined)) return text;
  if (attr & tok::kAttrByte) {
    uint8_t byte = 0;
    parse_byte_token(text, byte);  // validated at load
    return std::string(1, static_cast<char>(byte));
  }
  if (!(attr & tok::kAttrNormal)) return {};  // unused / undefined types render as nothing
  std::string out;
  if (t.type == Tokenizer::Type::kSpm) {
    static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpace.size(), kSpace) == 0) {
        out.push_back(' ');
        i += kSpace.size();
      } else {
        out.push_back(text[i++]);
      }
    }
    return out;
  }
  // Byte-level: every character stands for one byte. A character outside
  // the map (not produced by byte-level conversion) is kept as it is.
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t i = 0; i < text.size();) {
    const int n = tok::check_sequence(p + i, text.size() - i);
    if (n <= 0) {
      out.push_back(text[i++]);
      continue;
    }
    const int byte = tok::unicode_to_byte(tok::decode(p + i, static_cast<size_t>(n)));
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(text, i, static_cast<size_t>(n));
    }
    i += static_cast<size_t>(n);
  }
  return out;
}

Status load(const gguf::GgufFile& file, Tokenizer::Impl& t) {
  const std::string model_key = key("model");
  if (!file.find(model_key)) return Status::error(model_key + " is missing");
  auto model = file.get_string(model_key);
  if (!model.ok()) return model.status();
  if (model.value() == "llama") {
    t.type = Tokenizer::Type::kSpm;
  } else if (model.value() == "gpt2") {
    t.type = Tokenizer::Type::kBpe;
  } else {
    return Status::error(model_key + " = '" + model.value() +
                         "' is not supported (expected 'llama' or 'gpt2')");
  }

  if (Status s = load_vocab(file, t.vocab); !s.ok()) return s;
  tok::Vocab& vocab = t.vocab;
  const int32_t n = vocab.size();

  // Defaults per vocabulary type, then the metadata's word.
  if (t.type == Tokenizer::Type::kSpm) {
    t.bos = n > 1 ? 1 : -1;
    t.eos = n > 2 ? 2 : -1;
    t.unk = 0;
    t.add_bos = true;
    t.add_space_prefix = true;
  } else {
    auto pre_name = file.get_string(key("pre"));
    if (!pre_name.ok()) return pre_name.status();
    auto pre = tok::PreTokenizer::create(pre_name.value(), &t.warnings);
    if (!pre.ok()) return pre.status();
    t.pre_name = pre.value().name();
    t.add_bos = pre.value().add_bos_default();
    t.pre.emplace(std::move(pre.value()));

    const std::string merges_key = key("merges");
    if (!file.find(merges_key)) return Status::error(merges_key + " is missing");
    auto merges = file.get_string_array(merges_key);
    if (!merges.ok()) return merges.status();
    auto bpe = tok::BpeModel::create(vocab, merges.value());
    if (!bpe.ok()) return bpe.status();
    t.bpe.emplace(std::move(bpe.value()));
  }

  for (auto [name, id] : {std::pair{"bos_token_id", &t.bos}, std::pair{"eos_token_id", &t.eos},
                          std::pair{"unknown_token_id", &t.unk}, std::pair{"eot_token_id", &t.eot},
                          std::pair{"eom_token_id", &t.eom}}) {
    if (Status s = read_id(file, name, n, *id); !s.ok()) return s;
  }
  if (Status s = read_bool(file, "add_bos_token", t.add_bos); !s.ok()) return s;
  if (Status s = read_bool(file, "add_eos_token", t.add_eos); !s.ok()) return s;
  if (Status s = read_bool(file, "add_space_prefix", t.add_space_prefix); !s.ok()) return s;
  if (t.add_bos && t.bos < 0) {
    return Status::error(key("add_bos_token") + " is true but there is no " + key("bos_token_id"));
  }
  if (t.add_eos && t.eos < 0) {
    return Status::error(key("add_eos_token") + " is true but there is no " + key("eos_token_id"));
  }

  // Roles by text, and the end-of-generation set.
  t.eog.assign(n, false);
  for (const Role& role : roles()) {
    int32_t id = -1;
    if (role.id_key == std::string_view("eot_token_id")) id = t.eot;
    if (role.id_key == std::string_view("eom_token_id")) id = t.eom;
    for (const char* k : {role.id_key, role.alt_key}) {
      if (!k || id >= 0 || !file.find(key(k))) continue;
      // A bad optional id is not fatal: llama.cpp ignores it too.
      if (Status s = read_id(file, k, n, id); !s.ok()) t.warnings.push_back(s.message() + "; ignored");
    }
    // By text, in list order: for Llama 3 "<|eot_id|>" rather than
    // "<|end_of_text|>", for Qwen "<|im_end|>" rather than "<|endoftext|>".
    for (size_t i = 0; id < 0 && i < role.texts.size(); ++i) {
      id = vocab.find(role.texts[i]);
      if (id >= 0) vocab.attr[id] |= tok::kAttrControl;
    }
    if (role.id_key == std::string_view("eot_token_id")) t.eot = id;
    if (role.id_key == std::string_view("eom_token_id")) t.eom = id;
    if (id >= 0 && role.end_of_generation) t.eog[id] = true;
  }
  for (int32_t i = 0; i < n; ++i) {
    const auto& texts = eog_texts();
    if (std::find(texts.begin(), texts.end(), vocab.text[i]) != texts.end()) {
      t.eog[i] = true;
      vocab.attr[i] |= tok::kAttrControl;
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
  if (end_id >= 0 &&
      ((eog_with_text("<|return|>") >= 0 && eog_with_text("<|call|>") >= 0) ||
       (eog_with_text("<|calls|>") >= 0 && eog_with_text("<|flush|>") >= 0))) {
    t.eog[end_id] = false;
    vocab.attr[end_id] = tok::kAttrUserDefined;
  }
  const int32_t s_id = eog_with_text("</s>");
  if (s_id >= 0 && eog_with_text("<|tool_response>") >= 0) {
    t.eog[s_id] = false;
    vocab.attr[s_id] = tok::kAttrNormal;
  }

  // Piece cache (render form) and the special-token candidates, from the
  // final attributes.
  t.pieces.resize(n);
  for (int32_t i = 0; i < n; ++i) t.pieces[i] = render_piece(t, i);
  t.specials = tok::SpecialTokens(vocab);

  // Phi-3's special tokens swallow the whitespace that follows them, except
  // <unk>, <s> and <|endoftext|> (llama.cpp, keyed on general.name).
  {
    auto name = file.get_string("general.name");
    std::string lower = name.ok() ? name.value() : std::string();
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower.find("phi-3") != std::string::npos || lower.find("phi3") != std::string::npos) {
      for (int32_t id : t.specials.ids()) vocab.attr[id] |= tok::kAttrRstrip;
      if (int32_t id = vocab.find("</s>"); id >= 0) vocab.attr[id] |= tok::kAttrRstrip;
      for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
        if (int32_t id = vocab.find(text); id >= 0) vocab.attr[id] &= ~tok::kAttrRstrip;
      }
    }
  }

  if (t.type == Tokenizer::Type::kSpm) t.spm.emplace(vocab, t.unk);
  return {};
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  auto impl = std::make_unique<Impl>();
  if (Status s = load(file, *impl); !s.ok()) {
    return s.with_context("tokenizer of " + file.path());
  }
  // Also kept in warnings() for callers that report them their own way.
  for (const std::string& w : impl->warnings) {
    std::fprintf(stderr, "revis: warning: %s: %s\n", file.path().c_str(), w.c_str());
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

}  // namespace revis
