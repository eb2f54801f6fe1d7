// UTF-8 validation, sanitizing and encoding (see utf8.h).
#include "tokenizer/utf8.h"

namespace revis::tok {

size_t lead_byte_length(uint8_t lead) {
  switch (lead >> 4) {
    case 0xC:
    case 0xD:
      return 2;
    case 0xE:
      return 3;
    case 0xF:
      return 4;
    default:
      return 1;
  }
}

int check_sequence(const uint8_t* s, size_t avail) {
  const uint8_t b0 = s[0];
  if (b0 < 0x80) return 1;
  int trail = 0;
  // The first continuation byte has a narrower range for some leads: this is
  // what rules out overlong forms, surrogates and values above U+10FFFF.
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    trail = 1;
  } else if (b0 == 0xE0) {
    trail = 2;
    lo = 0xA0;
  } else if (b0 == 0xED) {
    trail = 2;
    hi = 0x9F;
  } else if (b0 >= 0xE1 && b0 <= 0xEF) {
    trail = 2;
  } else if (b0 == 0xF0) {
    trail = 3;
    lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    trail = 3;
  } else if (b0 == 0xF4) {
    trail = 3;
    hi = 0x8F;
  } else {
    return -1;  // continuation byte, C0/C1 or F5..FF can never start a character
  }
  for (int k = 1; k <= trail; ++k) {
    if (static_cast<size_t>(k) >= avail) return 0;
    const uint8_t c = s[k];
    const uint8_t l = k == 1 ? lo : 0x80;
    const uint8_t h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) return -k;
  }
  return trail + 1;
}

std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    const int n = check_sequence(p + i, text.size() - i);
    if (n > 0) {
      out.append(text.data() + i, static_cast<size_t>(n));
      i += static_cast<size_t>(n);
    } else {
      out.append(kReplacementChar);
      i += 1;
    }
  }
  return out;
}

uint32_t decode(const uint8_t* s, size_t n) {
  switch (n) {
    case 1:
      return s[0];
    case 2:
      return ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
    case 3:
      return ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
    default:
      return ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) |
             (s[3] & 0x3Fu);
  }
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace revis::tok
