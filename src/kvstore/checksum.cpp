#include "kvstore/checksum.h"

#include <cstring>

namespace revis::kvstore {
namespace {

constexpr uint64_t kLaneSeeds[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                                    0x082efa98ec4e6c89ull};  // digits of pi
constexpr uint64_t kMultiplier = 0x9e3779b97f4a7c15ull;  // odd: multiplying by it is a bijection

uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Each word goes into its lane through a bijection, so any change of one
// word changes that lane; the shift folds high bits back into low ones.
uint64_t absorb(uint64_t lane, uint64_t word) {
  lane = (lane ^ word) * kMultiplier;
  return lane ^ (lane >> 29);
}

// A final avalanche: every input bit affects every output bit.
uint64_t avalanche(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

}  // namespace

uint64_t checksum64(const void* data, size_t size, uint64_t seed) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t lanes[4];
  for (int i = 0; i < 4; ++i) lanes[i] = kLaneSeeds[i] ^ seed;
  size_t i = 0;
  for (; i + 32 <= size; i += 32)
    for (int k = 0; k < 4; ++k) lanes[k] = absorb(lanes[k], load_le64(p + i + 8 * k));
  // The tail (under 32 bytes) in zero-padded words; the length below tells
  // "abc" from "abc\0".
  uint8_t tail[32] = {};
  if (size > i) std::memcpy(tail, p + i, size - i);
  for (int k = 0; k < 4; ++k) lanes[k] = absorb(lanes[k], load_le64(tail + 8 * k));
  uint64_t h = avalanche(static_cast<uint64_t>(size) ^ seed);
  for (int k = 0; k < 4; ++k) h = avalanche(h ^ lanes[k]);
  return h;
}

std::string hex64(uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) s[i] = digits[value & 15];
  return s;
}

}  // namespace revis::kvstore
