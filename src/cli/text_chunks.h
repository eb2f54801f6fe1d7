// A text's tokens cut into the fixed-size chunks that `revis imatrix` and
// `revis perplexity` run one at a time, as llama.cpp's tools cut them: where
// the model adds BOS, the text is tokenized with it (one BOS before the
// whole text); the stream is cut into whole chunks of n_ctx tokens from the
// start (the tail that does not fill one is left out), and each chunk's
// first token is then replaced by BOS. Plain values; no sharing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "revis/status.h"

namespace revis::cli {

// `tokens`: the text without BOS. At most max_chunks chunks (0: all the
// tokens fill); bos < 0 (the model adds none) leaves the stream and the
// first tokens as they are. An error, naming `text_name`, where the tokens
// do not fill one chunk.
Result<std::vector<std::vector<int32_t>>> text_chunks(const std::vector<int32_t>& tokens, const std::string& text_name,
                                                      int n_ctx, int max_chunks, int32_t bos);

}  // namespace revis::cli
