// BPE on one pre-tokenized word, byte-level (GPT-2 style) or in
// SentencePiece spelling (Gemma 4, see PreTokenizer::spm_spelling).
//
// Byte-level, the word's bytes start as one symbol each (the token of the
// byte's stand-in character, see byte_unicode.h); in SentencePiece
// spelling each UTF-8 character is one symbol. Then the adjacent pair whose
// merge has the lowest rank (earliest line of tokenizer.ggml.merges) is
// merged, leftmost first on ties, until no pair has a merge. Merges are
// keyed by the two token ids, so no strings are built while merging.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "revis/status.h"
#include "tokenizer/vocab.h"

namespace revis::tok {

class BpeModel {
 public:
  // `merges` are "left right" lines. Every left, right and left+right must
  // be a token of `vocab`; a merge that is not is an error (as in Hugging
  // Face tokenizers). Repeated pairs keep their first rank.
  static Result<BpeModel> create(const Vocab& vocab, const std::vector<std::string>& merges);

  // Appends the tokens of `word` (raw UTF-8, not yet byte-mapped).
  // ignore_merges: emit the whole word as one token when the vocabulary has
  // it (Llama 3). Bytes whose stand-in is not a token become `unk` when
  // there is one (>= 0) and are dropped otherwise, like llama.cpp does.
  void tokenize_word(const Vocab& vocab, std::string_view word, bool ignore_merges, int32_t unk,
                     std::vector<int32_t>& out) const;
  // Appends the tokens of `word` in SentencePiece spelling (valid UTF-8,
  // spaces already U+2581). A symbol left without a token becomes its
  // bytes' <0xNN> tokens; bytes without one are dropped, as llama.cpp does.
  void tokenize_spm_spelled_word(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out) const;

  size_t n_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  struct Symbol {
    int32_t id;     // token, -1 if the text has no token
    int32_t prev;   // neighbours in the live chain, -1 at the ends
    int32_t next;
    uint32_t begin;  // first byte in the word
    uint32_t n;      // bytes covered; 0 once merged into its left neighbour
  };
  // Merges the chain `sym` (linked in order, starting at 0) as far as the
  // merges allow.
  void merge(std::vector<Symbol>& sym) const;

  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_token_{};      // token of each byte's stand-in, -1 if none
  std::array<int32_t, 256> byte_fallback_{};   // token <0xNN> of each byte, -1 if none
};

}  // namespace revis::tok
