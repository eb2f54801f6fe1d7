// Tokenizer's private state and the helpers that build it, shared by the
// files of the tokenizer module. Not part of the public API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace revis {

struct Tokenizer::Impl {
  Type type = Type::kSpm;
  tok::Vocab vocab;
  std::vector<std::string> pieces;  // token_to_piece with render_special, per id
  tok::SpecialTokens specials;
  std::optional<tok::SpmModel> spm;      // Type::kSpm
  std::optional<tok::BpeModel> bpe;      // Type::kBpe
  std::optional<tok::PreTokenizer> pre;  // Type::kBpe

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;
  std::vector<bool> eog;  // per id
  std::string pre_name;
  std::vector<std::string> warnings;
};

namespace tok {

inline constexpr const char* kKeyPrefix = "tokenizer.ggml.";

// load.cpp: reads the optional id key tokenizer.ggml.<name>; absent leaves
// `id` unchanged, a value outside [0, n_vocab) is an error.
Status read_token_id(const gguf::GgufFile& file, const char* name, int32_t n_vocab, int32_t& id);

// token_roles.cpp: end-of-turn/message and FIM tokens (from metadata, else
// by text), the end-of-generation set, and the control-type overrides that
// come with them. Runs before the special-token list is built.
void assign_roles(const gguf::GgufFile& file, Tokenizer::Impl& t);
// token_roles.cpp: per-model attribute fixes (Phi-3's whitespace-eating
// special tokens). Runs after the special-token list is built.
void apply_model_token_rules(const gguf::GgufFile& file, Tokenizer::Impl& t);

// pieces.cpp: "<0xNN>" -> NN.
bool parse_byte_token(const std::string& text, uint8_t& byte);
// pieces.cpp: the bytes token `id` stands for, special tokens rendered.
std::string render_piece(const Tokenizer::Impl& t, int32_t id);

}  // namespace tok
}  // namespace revis
