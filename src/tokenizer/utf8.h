// UTF-8 helpers shared by the tokenizers and the streaming detokenizer.
//
// Two notions of "character" coexist on purpose:
//  - lead_byte_length(): the length llama.cpp's SPM tokenizer assumes from a
//    lead byte alone (no validation); SPM symbol splitting must reproduce it
//    byte for byte to give the same ids on malformed input.
//  - check_sequence(): strict RFC 3629 validation (no overlongs, surrogates
//    or code points above U+10FFFF), used everywhere text must be valid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace revis::tok {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Sequence length implied by the high nibble of `lead` (1 for ASCII and for
// stray continuation bytes, 2 for 0xC_/0xD_, 3 for 0xE_, 4 for 0xF_).
size_t lead_byte_length(uint8_t lead);

// Examines the bytes at s[0..avail) (avail >= 1):
//   n > 0  : a complete, well-formed character of n bytes;
//   0      : a proper prefix of a well-formed character (more bytes needed);
//   -k < 0 : ill-formed; its maximal subpart (the bytes that must be replaced
//            by a single U+FFFD) is k bytes long, k >= 1.
int check_sequence(const uint8_t* s, size_t avail);

// Copy of `text` where every byte that does not start a well-formed
// character becomes U+FFFD, one per byte, like llama.cpp's decoder does
// before byte-level BPE.
std::string sanitize(std::string_view text);

// Decodes the well-formed character of `n` bytes at `s` (as reported by
// check_sequence) into a code point.
uint32_t decode(const uint8_t* s, size_t n);

// Appends the UTF-8 encoding of `cp` (which must be <= 0x10FFFF).
void append(std::string& out, uint32_t cp);

}  // namespace revis::tok
