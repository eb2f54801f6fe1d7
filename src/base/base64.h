// Base64 (RFC 4648, the standard alphabet, padded), as OpenAI's embeddings
// use it for little-endian float32 vectors (encoding_format "base64"), and
// the ticket protocol carries them.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace revis {

std::string base64_encode(std::span<const unsigned char> bytes);
// None when `text` is not padded standard base64.
std::optional<std::string> base64_decode(std::string_view text);

// A vector as little-endian float32 values, in base64; and back (none when
// the text is not base64 of a whole number of floats).
std::string floats_base64(std::span<const float> values);
std::optional<std::vector<float>> floats_from_base64(std::string_view text);

}  // namespace revis
