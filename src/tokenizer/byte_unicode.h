// GPT-2's reversible byte <-> unicode map used by byte-level BPE.
//
// Byte-level vocabularies never store raw bytes: each byte is replaced by a
// printable code point so that every token text is valid UTF-8 without
// whitespace or control characters. Printable Latin-1 bytes map to
// themselves; the other 68 bytes take U+0100.. in byte order (so a space is
// "Ġ" U+0120 and a newline "Ċ" U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace revis::tok {

// UTF-8 text of the code point that stands for `byte`.
const std::string& byte_to_unicode(uint8_t byte);

// The byte that code point `cp` stands for, or -1 if it stands for none.
int unicode_to_byte(uint32_t cp);

// Maps every byte of `raw` to its stand-in character.
std::string bytes_to_unicode_text(std::string_view raw);

}  // namespace revis::tok
