// Finding special-token texts in the input before ordinary tokenization.
//
// The candidates are the control, user-defined and unknown tokens. They are
// tried longest text first (ties: lower id first); each one splits every
// text fragment that contains it, left to right, into text / token / text,
// and the fragments it leaves are searched by the next candidates. This is
// llama.cpp's order, which decides overlaps such as "<|a|>" inside a longer
// token text. Control and unknown tokens take part only when parse_special
// is set, and never where a match would overlap one of the literal spans;
// user-defined tokens always do. A token with the lstrip (rstrip) attribute
// swallows ASCII whitespace on its left (right).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace revis::tok {

struct Fragment {
  int32_t token;  // >= 0: this special token; -1: the text [begin, end)
  size_t begin;
  size_t end;
};

class SpecialTokens {
 public:
  SpecialTokens() = default;
  explicit SpecialTokens(const Vocab& vocab);

  // Replaces `out` with the fragments of `text` (none for empty text).
  // `literal`: byte ranges of text where control tokens are not matched.
  void partition(const Vocab& vocab, std::string_view text, bool parse_special, std::span<const TextSpan> literal,
                 std::vector<Fragment>& out) const;

  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  std::vector<int32_t> ids_;  // candidates, longest text first
};

}  // namespace revis::tok
