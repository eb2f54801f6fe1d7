// The bytes each token stands for (token_to_piece with special tokens
// rendered), computed once per vocabulary at load time.
#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace revis::tok {

bool parse_byte_token(const std::string& text, uint8_t& byte) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') return false;
  const int hi = hex(text[3]), lo = hex(text[4]);
  if (hi < 0 || lo < 0) return false;
  byte = static_cast<uint8_t>(hi * 16 + lo);
  return true;
}

std::string render_piece(const Tokenizer::Impl& t, int32_t id) {
  const std::string& text = t.vocab.text[id];
  const uint32_t attr = t.vocab.attr[id];
  if (attr & (kAttrControl | kAttrUnknown | kAttrUserDefined)) return text;
  if (attr & kAttrByte) {
    uint8_t byte = 0;
    parse_byte_token(text, byte);  // validated at load
    return std::string(1, static_cast<char>(byte));
  }
  if (!(attr & kAttrNormal)) return {};  // unused / undefined types render as nothing
  std::string out;
  if (t.type == Tokenizer::Type::kSpm || (t.pre && t.pre->spm_spelling())) {
    static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpace.size(), kSpace) == 0) {
        out.push_back(' ');
        i += kSpace.size();
      } else {
        out.push_back(text[i++]);
      }
    }
    return out;
  }
  // Byte-level: every character stands for one byte. A character outside
  // the map (not produced by byte-level conversion) is kept as it is.
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t i = 0; i < text.size();) {
    const int n = check_sequence(p + i, text.size() - i);
    if (n <= 0) {
      out.push_back(text[i++]);
      continue;
    }
    const int byte = unicode_to_byte(decode(p + i, static_cast<size_t>(n)));
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(text, i, static_cast<size_t>(n));
    }
    i += static_cast<size_t>(n);
  }
  return out;
}

}  // namespace revis::tok
