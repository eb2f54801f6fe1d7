#include "cli/text_chunks.h"

#include <algorithm>

namespace revis::cli {

Result<std::vector<std::vector<int32_t>>> text_chunks(const std::vector<int32_t>& tokens, const std::string& text_name,
                                                      int n_ctx, int max_chunks, int32_t bos) {
  // llama.cpp tokenizes the whole text with BOS, so with a BOS model the
  // first chunk holds the text's first n_ctx - 1 tokens, not n_ctx - 1 from
  // its second on: the chunks line up with llama-perplexity's only so.
  std::vector<int32_t> stream;
  if (bos >= 0) stream.push_back(bos);
  stream.insert(stream.end(), tokens.begin(), tokens.end());
  size_t n_chunks = stream.size() / static_cast<size_t>(n_ctx);
  if (n_chunks == 0)
    return Status::error(text_name + ": " + std::to_string(stream.size()) + " tokens, fewer than one chunk of -c " +
                         std::to_string(n_ctx));
  if (max_chunks > 0) n_chunks = std::min(n_chunks, static_cast<size_t>(max_chunks));
  std::vector<std::vector<int32_t>> chunks;
  for (size_t c = 0; c < n_chunks; ++c) {
    chunks.emplace_back(stream.begin() + static_cast<long>(c * n_ctx), stream.begin() + static_cast<long>((c + 1) * n_ctx));
    if (bos >= 0) chunks.back()[0] = bos;
  }
  return chunks;
}

}  // namespace revis::cli
