// POST /v1/embeddings in OpenAI's shapes: the request (`input` as a string,
// an array of strings, an array of token ids or an array of such arrays;
// `encoding_format` float or base64) and the response. An input's
// embedding is the mean of the model's final hidden states over its tokens,
// scaled to length 1 (JobResult::embeddings): what llama-server answers
// with `--pooling mean`. Fields that would change the vectors and that
// revis cannot honour (`dimensions`) are refused.
//
// Thread-safety: free functions on values.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/answer_format.h"
#include "protocol/errors.h"
#include "protocol/job.h"
#include "protocol/request_limits.h"

namespace revis::node {

// The most inputs one request may carry (OpenAI's limit too).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingRequest {
  std::string model;  // as sent; the server maps it to a tier
  std::vector<EmbeddingInput> inputs;
  bool base64 = false;  // encoding_format "base64": little-endian float32
};

// Errors are bad_request with a message naming the field.
Outcome<EmbeddingRequest> parse_embedding_request(std::string_view body, const RequestLimits& limits = {});

// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
// "model", "usage": {"prompt_tokens", "total_tokens"}}, from the one result
// of the embeddings job. Never streamed.
std::unique_ptr<AnswerFormat> embeddings_format(std::string model, bool base64);

}  // namespace revis::node
