// A text's tokens cut into the fixed-size chunks that `revis imatrix` and
// `revis perplexity` run one at a time, as llama.cpp's tools cut them: whole
// chunks of n_ctx tokens from the start (the tail that does not fill one is
// left out), each chunk's first token replaced by BOS where the model adds
// one. Plain values; no sharing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "revis/status.h"

namespace revis::cli {

// At most max_chunks chunks (0: all the tokens fill); bos < 0 leaves the
// first tokens as they are. An error, naming `text_name`, where the tokens
// do not fill one chunk.
Result<std::vector<std::vector<int32_t>>> text_chunks(const std::vector<int32_t>& tokens, const std::string& text_name,
                                                      int n_ctx, int max_chunks, int32_t bos);

}  // namespace revis::cli
