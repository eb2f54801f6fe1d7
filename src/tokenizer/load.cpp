// Tokenizer::from_gguf: reads and validates the tokenizer.ggml.* metadata
// and assembles the tokenizer. Defaults that the metadata may override
// (special ids, BOS policy, space prefix) follow llama.cpp per vocabulary
// type; token roles are assigned in token_roles.cpp.
#include <cmath>
#include <cstdio>
#include <limits>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer_impl.h"

namespace revis {
namespace tok {

uint32_t attr_from_token_type(int64_t type) {
  switch (type) {
    case 1:
      return kAttrNormal;
    case 2:
      return kAttrUnknown;
    case 3:
      return kAttrControl;
    case 4:
      return kAttrUserDefined;
    case 5:
      return kAttrUnused;
    case 6:
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

Status read_token_id(const gguf::GgufFile& file, const char* name, int32_t n_vocab, int32_t& id) {
  const std::string k = std::string(kKeyPrefix) + name;
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

}  // namespace tok

namespace {

std::string key(const char* name) { return std::string(tok::kKeyPrefix) + name; }

Status read_bool(const gguf::GgufFile& file, const char* name, bool& value) {
  auto v = file.get_bool(key(name), value);
  if (!v.ok()) return v.status();
  value = v.value();
  return {};
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
    if ((vocab.attr[i] & tok::kAttrByte) && !tok::parse_byte_token(text, byte)) {
      return Status::error(tokens_key + "[" + std::to_string(i) + "] '" + text +
                           "' has type BYTE but is not of the form <0xNN>");
    }
  }
  return {};
}

Status load(const gguf::GgufFile& file, Tokenizer::Impl& t) {
  const std::string model_key = key("model");
  if (!file.find(model_key)) return Status::error(model_key + " is missing");
  auto model = file.get_string(model_key);
  if (!model.ok()) return model.status();
  // Gemma 4's converter names its own model and writes no pre-tokenizer:
  // BPE in SentencePiece spelling, pre-tokenizer "gemma4".
  const bool gemma4 = model.value() == "gemma4";
  if (model.value() == "llama") {
    t.type = Tokenizer::Type::kSpm;
  } else if (model.value() == "gpt2" || gemma4) {
    t.type = Tokenizer::Type::kBpe;
  } else {
    return Status::error(model_key + " = '" + model.value() +
                         "' is not supported (expected 'llama', 'gpt2' or 'gemma4')");
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
    // llama.cpp's ids for a byte-level BPE file that names none (GPT-2's
    // <|endoftext|> would be 50256; 11 is what it falls back to). A gemma4
    // file has none but its metadata's.
    t.bos = n > 11 && !gemma4 ? 11 : -1;
    t.eos = t.bos;
    auto pre_name = gemma4 ? Result<std::string>(std::string("gemma4")) : file.get_string(key("pre"));
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
    if (Status s = tok::read_token_id(file, name, n, *id); !s.ok()) return s;
  }
  if (Status s = read_bool(file, "add_bos_token", t.add_bos); !s.ok()) return s;
  if (t.pre && t.pre->spm_spelling()) t.add_bos = true;
  if (Status s = read_bool(file, "add_eos_token", t.add_eos); !s.ok()) return s;
  if (Status s = read_bool(file, "add_space_prefix", t.add_space_prefix); !s.ok()) return s;
  if (t.add_bos && t.bos < 0) {
    return Status::error(key("add_bos_token") + " is true but there is no " + key("bos_token_id"));
  }
  if (t.add_eos && t.eos < 0) {
    return Status::error(key("add_eos_token") + " is true but there is no " + key("eos_token_id"));
  }

  tok::assign_roles(file, t);

  // Piece cache (render form) and the special-token candidates, from the
  // final attributes.
  t.pieces.resize(n);
  for (int32_t i = 0; i < n; ++i) t.pieces[i] = tok::render_piece(t, i);
  t.specials = tok::SpecialTokens(vocab);

  tok::apply_model_token_rules(file, t);

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
