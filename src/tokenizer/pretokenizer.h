// Regex pre-tokenizers for byte-level BPE, selected by `tokenizer.ggml.pre`.
//
// A pre-tokenizer is a list of regexes applied in sequence: each one splits
// every piece produced so far into its matches and the unmatched text
// between them (nothing is dropped). The regex lists are the ones llama.cpp
// uses for each pre-tokenizer name, run with PCRE2 in UTF + UCP mode so
// \p{L}, \p{N}, \p{P} are real Unicode classes.
//
// Gemma 4's vocabulary (tokenizer.ggml.model "gemma4", or pre "gemma4") is
// BPE in SentencePiece's spelling rather than byte-level: see
// spm_spelling() below.
//
// Two details reproduce llama.cpp's reading of those regexes exactly:
//  - "\s" means the Unicode White_Space property (PCRE2's own \s would also
//    take U+180E);
//  - non-ASCII whitespace is matched as if it were U+000B, i.e. it is
//    whitespace but never part of a literal character range such as
//    "[ࠀ-一]". Splitting runs on a copy of the text with those characters
//    replaced, and offsets are mapped back.
//
// A PreTokenizer is immutable after create() and safe to use from many
// threads at once (match data is allocated per call).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "revis/status.h"

namespace revis::tok {

class Regex;

class PreTokenizer {
 public:
  // `name` is the tokenizer.ggml.pre value. Unknown names fall back to
  // "default" and add a line to `warnings`.
  static Result<PreTokenizer> create(std::string_view name, std::vector<std::string>* warnings);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Splits valid UTF-8 `text` into words (views into `text`), appended to
  // `words` in order. The words concatenate back to `text`.
  void split(std::string_view text, std::vector<std::string_view>& words) const;

  const std::string& name() const { return name_; }  // the resolved name
  // Llama-3-style vocabularies take a whole word as one token when the
  // vocabulary has it, before trying merges.
  bool ignore_merges() const { return ignore_merges_; }
  // Whether the tokenizer family adds BOS when the metadata does not say.
  bool add_bos_default() const { return add_bos_; }
  // SentencePiece spelling (Gemma 4): a space is U+2581 in the vocabulary
  // and is replaced before splitting; merging starts from UTF-8 characters
  // rather than byte stand-ins, a character without a token falls back to
  // its <0xNN> byte tokens, and a word of newlines only is one token when
  // the vocabulary has it. Such a family always adds BOS, whatever the
  // metadata says, as llama.cpp does.
  bool spm_spelling() const { return spm_spelling_; }

 private:
  PreTokenizer() = default;
  std::string name_;
  bool ignore_merges_ = false;
  bool add_bos_ = false;
  bool spm_spelling_ = false;
  std::vector<std::shared_ptr<const Regex>> regexes_;
};

}  // namespace revis::tok
