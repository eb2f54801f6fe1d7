// A text's tokens under the vocabulary of a GGUF file, read without loading
// a model, so that vocabulary-only files work too (`revis tokenize`).
//
// Thread-safety: a pure function of the file and the text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "revis/status.h"

namespace revis {

struct TokenizedText {
  std::vector<int32_t> ids;
  std::vector<std::string> pieces;  // the bytes of each id (part of a UTF-8 character at times)
};

// add_bos: BOS first where the vocabulary asks for it. parse_special:
// control-token texts ("<|im_start|>") become those tokens. An error names
// the file.
Result<TokenizedText> tokenize_with_vocabulary_of(const std::string& path, std::string_view text, bool add_bos,
                                                  bool parse_special);

}  // namespace revis
