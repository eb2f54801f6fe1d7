// The sampler's parameters: how one step's logits become the next token.
//
// Defaults and meanings follow llama.cpp. The pipeline that applies them
// (src/sample/sampler.h) runs, for every step:
//   logit_bias -> penalties -> (argmax if temperature <= 0) -> top-k
//   -> temperature -> softmax -> top-p -> min-p -> one weighted draw.
// SamplingParams is a plain value; validate() names the first field out of
// range.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "revis/status.h"

namespace revis {

struct SamplingParams {
  float temperature = 0.8f;      // <= 0: greedy argmax (no RNG use)
  int32_t top_k = 40;            // keep the k highest logits; 0 = off
  float top_p = 0.95f;           // keep the smallest top set with mass >= p; 1 = off
  float min_p = 0.05f;           // drop tokens with prob < min_p * max prob; 0 = off
  float repeat_penalty = 1.0f;   // recent tokens: logit>0 divided, logit<=0 multiplied; 1 = off
  int32_t repeat_last_n = 64;    // how many recent accepted tokens the penalties see; 0 = none
  float frequency_penalty = 0.0f;  // logit -= count * frequency_penalty (count in the window)
  float presence_penalty = 0.0f;   // logit -= presence_penalty if count > 0
  uint64_t seed = 0;             // fixed default so runs reproduce unless a caller picks one
  // (token id, bias) pairs added to the raw logits before anything else, as
  // OpenAI's logit_bias: a large negative bias bans a token, a large
  // positive one all but forces it. Biases must be finite; a token listed
  // twice gets both. Ids outside the vocabulary are an error of generate().
  std::vector<std::pair<int32_t, float>> logit_bias;

  // ok, or an error naming the field, the allowed range and the value found.
  Status validate() const;
};

}  // namespace revis
