// SentencePiece-style BPE as llama.cpp implements it for `model = "llama"`.
//
// The (already space-escaped) text starts as one symbol per UTF-8 character;
// the adjacent pair whose concatenation is a token with the highest score is
// merged, leftmost first on ties, until no adjacent pair forms a token.
// Symbols that are not tokens fall back to one <0xNN> token per byte.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace revis::tok {

class SpmModel {
 public:
  // unk: emitted for a byte that has neither a <0xNN> nor a one-byte token
  // (-1: drop it).
  SpmModel(const Vocab& vocab, int32_t unk);

  // Appends the tokens of `text`, which must already have ' ' replaced by
  // U+2581 (and the optional leading space added).
  void tokenize(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const;

 private:
  std::array<int32_t, 256> byte_token_{};
  int32_t unk_;
};

}  // namespace revis::tok
