// Tokenizer's private state, shared by load.cpp (which builds it from GGUF
// metadata) and tokenizer.cpp (which runs it). Not part of the public API.
#pragma once

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
  std::optional<tok::SpmModel> spm;     // Type::kSpm
  std::optional<tok::BpeModel> bpe;     // Type::kBpe
  std::optional<tok::PreTokenizer> pre; // Type::kBpe

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;
  std::vector<bool> eog;  // per id
  std::string pre_name;
  std::vector<std::string> warnings;
};

}  // namespace revis
