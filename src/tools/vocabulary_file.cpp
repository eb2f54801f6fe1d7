#include "tools/vocabulary_file.h"

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace revis {

Result<TokenizedText> tokenize_with_vocabulary_of(const std::string& path, std::string_view text, bool add_bos,
                                                  bool parse_special) {
  auto file = gguf::GgufFile::open(path);
  if (!file.ok()) return file.status();
  auto tokenizer = Tokenizer::from_gguf(**file);
  if (!tokenizer.ok()) return tokenizer.status().with_context(path);
  const Tokenizer& tok = **tokenizer;
  TokenizedText out;
  out.ids = tok.encode(text, add_bos && tok.add_bos_default(), parse_special);
  for (int32_t id : out.ids) out.pieces.push_back(tok.token_to_piece(id));
  return out;
}

}  // namespace revis
