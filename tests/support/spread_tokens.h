// Token ids spread over a vocabulary by a seeded xorshift: prompts for
// tests where the model need not read sense, only different tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace revis::testing {

inline std::vector<int32_t> spread_tokens(int n_vocab, int n, uint32_t seed) {
  std::vector<int32_t> t(n);
  uint32_t x = 2463534242u + seed;
  for (int32_t& id : t) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    id = static_cast<int32_t>(x % n_vocab);
  }
  return t;
}

}  // namespace revis::testing
