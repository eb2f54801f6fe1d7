// The fixed grids of the IQ1/IQ2/IQ3 types: each point is 8 (IQ1, IQ2) or
// 4 (IQ3) small unsigned values, stored little-endian in one 64- or 32-bit
// word, byte k = value k; IQ1's bytes are int8 (-1, 0 or 1). They are
// constants of the GGUF format; iq_grids.cpp holds them as level indices
// and expands them at compile time.
//
// Internal to src/quant. Immutable, safe from any thread.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace revis::quant {

extern const std::array<uint64_t, 256> kGridIq2Xxs;   // values 8, 25, 43
extern const std::array<uint64_t, 512> kGridIq2Xs;    // values 8, 25, 43
extern const std::array<uint64_t, 1024> kGridIq2S;    // values 8, 25, 43
extern const std::array<uint32_t, 256> kGridIq3Xxs;   // values 4, 12, .., 52, 62
extern const std::array<uint32_t, 512> kGridIq3S;     // values 1, 3, .., 15
extern const std::array<uint64_t, 2048> kGridIq1S;    // int8 values -1, 0, 1

// The levels a grid's values take, and the grids as 16-bit codes of level
// indices (value k's at bits 2k..2k+1, for IQ3 3k..3k+2), for kernels that
// look points up in registers.
inline constexpr uint8_t kIq2Levels[] = {8, 25, 43};
inline constexpr uint8_t kIq3XxsLevels[] = {4, 12, 20, 28, 36, 44, 52, 62};
inline constexpr uint8_t kIq3SLevels[] = {1, 3, 5, 7, 9, 11, 13, 15};
extern const std::array<uint16_t, 256> kGridIq2XxsCodes;
extern const std::array<uint16_t, 256> kGridIq3XxsCodes;
extern const std::array<uint16_t, 512> kGridIq3SCodes;

// The 8 sign bits a 7-bit sign field stands for: bit j set = value j is
// negative; bit 7 makes the number of negative values even.
inline constexpr uint8_t sign_bits(unsigned seven) {
  return static_cast<uint8_t>((seven & 127) | ((std::popcount(seven & 127) & 1) << 7));
}

// sign_bits of every 7-bit field, for the SIMD kernels (which must not
// call inline functions shared with files compiled for another CPU).
inline constexpr std::array<uint8_t, 128> kSignBytes = [] {
  std::array<uint8_t, 128> table{};
  for (unsigned seven = 0; seven < 128; ++seven) table[seven] = sign_bits(seven);
  return table;
}();

// Value k of a grid point.
inline uint8_t grid_value(uint64_t point, int k) { return static_cast<uint8_t>(point >> (8 * k)); }

}  // namespace revis::quant
