// GPT-2 byte <-> unicode map (see byte_unicode.h). The tables are built once,
// on first use, and are immutable afterwards (thread-safe static init).
#include "tokenizer/byte_unicode.h"

#include <array>

#include "tokenizer/utf8.h"

namespace revis::tok {
namespace {

struct ByteMap {
  std::array<std::string, 256> text;  // byte -> UTF-8 of its stand-in
  std::array<int16_t, 512> back;      // stand-in code point -> byte, -1 if none

  ByteMap() {
    back.fill(-1);
    auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : next++;
      append(text[b], cp);
      back[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t byte) { return byte_map().text[byte]; }

int unicode_to_byte(uint32_t cp) { return cp < byte_map().back.size() ? byte_map().back[cp] : -1; }

std::string bytes_to_unicode_text(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out += byte_to_unicode(static_cast<uint8_t>(c));
  return out;
}

}  // namespace revis::tok
