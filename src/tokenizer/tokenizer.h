// Text <-> token ids for GGUF models, built from the file's metadata alone.
//
// Contract
//  - Tokenizer::from_gguf reads the `tokenizer.ggml.*` keys and supports the
//    two vocabulary types llama.cpp calls SPM (`model = "llama"`,
//    SentencePiece-style BPE with scores and <0xNN> byte fallback) and BPE
//    (`model = "gpt2"`, byte-level BPE with ranked merges and a regex
//    pre-tokenizer chosen by `tokenizer.ggml.pre`). Token ids agree with
//    llama.cpp's for the same file and flags. Malformed metadata (missing
//    tokens, arrays of the wrong length or type, merges naming unknown
//    tokens, special ids out of range, ...) gives an error Status, never a
//    crash.
//  - encode() accepts any bytes. Special-token texts: control tokens are
//    recognised in the text only when parse_special is true; user-defined
//    tokens (type 4, "added tokens") always are, as in llama.cpp and
//    Hugging Face tokenizers. encode_template() recognises control tokens
//    everywhere except in given literal spans (text from clients inside a
//    chat template), which are tokenized as if parse_special were false.
//  - token_to_piece() gives the raw bytes a token stands for (which may be
//    part of a UTF-8 character); Detokenizer reassembles whole characters.
//
// Thread-safety: a Tokenizer is immutable after from_gguf; all const methods
// may be called concurrently. A Detokenizer is a small per-stream state
// object: use one per thread/stream.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "revis/status.h"
#include "revis/text_span.h"

namespace revis {

namespace gguf {
class GgufFile;
}
namespace tok {
struct Fragment;
}

class Tokenizer {
 public:
  enum class Type { kSpm, kBpe };

  // Builds the tokenizer described by `file`'s metadata. `file` may be
  // closed afterwards: everything needed is copied.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const gguf::GgufFile& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_bos: prepend BOS (the caller decides; add_bos_default() says what
  //   the metadata asks for). Ignored when the vocabulary has no BOS.
  // parse_special: match control-token texts such as "<|im_start|>" in the
  //   text; otherwise they are tokenized as plain text.
  // add_eos: append EOS (add_eos_default() says what the metadata asks for).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special,
                              bool add_eos = false) const;
  // encode() with parse_special, except that no control token is matched
  // overlapping a `literal` span. Without control-token texts in the spans
  // the ids equal encode(text, add_bos, true).
  std::vector<int32_t> encode_template(std::string_view text, bool add_bos, std::span<const TextSpan> literal) const;

  // Raw bytes the token stands for: SentencePiece "▁" becomes a space,
  // byte-level characters become their bytes, <0xNN> becomes byte NN.
  // Control/unknown tokens give their text only when render_special is set,
  // "" otherwise; out-of-range ids give "".
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  // Concatenated pieces. For SPM vocabularies this keeps the space that
  // encode() puts before the text (add_space_prefix).
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

  int32_t n_vocab() const;
  int32_t bos() const;  // -1 when the vocabulary has none
  int32_t eos() const;  // -1 when none
  int32_t eot() const;  // end of turn (metadata or text like "<|eot_id|>"), -1 when none
  bool add_bos_default() const;
  bool add_eos_default() const;
  // SPM only: encode() puts a space before text that starts the input or
  // follows a special token.
  bool add_space_prefix() const;
  // eos, eot, eom, FIM pad/repo/file-separator tokens, and tokens such as
  // <|im_end|>, <|eot_id|>, <|endoftext|> recognised by their text.
  bool is_end_of_generation(int32_t id) const;
  // Control (type 3) or unknown (type 2) token: not rendered by default.
  bool is_control(int32_t id) const;

  // Id of the token whose vocabulary text is exactly `text` (e.g. "<|im_end|>",
  // "▁the", "Ġthe").
  std::optional<int32_t> find_token(std::string_view text) const;
  // The token's text as stored in the vocabulary ("" for out-of-range ids).
  const std::string& token_text(int32_t id) const;

  Type type() const;
  // The `tokenizer.ggml.pre` value in use ("default" after a fallback; empty
  // for SPM).
  const std::string& pre_tokenizer() const;
  // Non-fatal findings while loading (unknown pre-tokenizer, ignored ids, ...).
  const std::vector<std::string>& warnings() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  // Tokenizes text already split into special tokens and plain fragments.
  std::vector<int32_t> encode_fragments(std::string_view text, std::span<const tok::Fragment> fragments, bool add_bos,
                                        bool add_eos) const;
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenizer: feed ids one at a time and get text that always
// consists of whole, valid UTF-8 characters. Bytes of an incomplete
// character are held back until the rest arrives; bytes that can never form
// a character come out as U+FFFD. flush() emits what is held back (as
// U+FFFD) and resets the state. The Tokenizer must outlive the Detokenizer.
class Detokenizer {
 public:
  explicit Detokenizer(const Tokenizer& tokenizer, bool render_special = false);

  // With `render`, a control token gives its text even when the
  // Detokenizer was made without render_special.
  std::string push(int32_t id, bool render = false);
  std::string flush();
  void reset() { pending_.clear(); }
  // Bytes currently held back.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string take(bool at_end);

  const Tokenizer* tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace revis
