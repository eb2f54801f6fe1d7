// Small helpers shared by the x86-64 kernel files (simd_avx2.cpp,
// simd_avx512.cpp). Each of those files is compiled with its own -m flags,
// so everything here has internal linkage: an inline function with external
// linkage would be merged across them by the linker, and an AVX2-only CPU
// could end up running the copy compiled for AVX-512.
//
// Internal to src/quant; include only from a file compiled with at least
// -mavx2 -mfma -mf16c.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

namespace revis::quant {
namespace {

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

inline float half(uint16_t h) { return _cvtsh_ss(h); }

// Q4_K/Q5_K's eight 6-bit scales and mins (layout in k_quants.cpp) as
// bytes: scales 0..7, then mins 0..7. Scales and mins 0..3 are the low 6
// bits of bytes 0..3 and 4..7; 4..7 take their low 4 bits from bytes 8..11
// (scales in the low nibbles, mins in the high) and their top 2 bits from
// the top of bytes 0..3 (scales) and 4..7 (mins).
inline __m128i scales_6bit(const uint8_t* packed) {
  // 16 bytes from a 12-byte field: the 4 after it are the block's own quants.
  const __m128i v = load128(packed);
  const __m128i low = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i top = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i six = _mm_and_si128(low, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const __m128i high_nibbles = _mm_and_si128(_mm_srli_epi16(low, 4), _mm_setr_epi32(0, 0, 0, 0x0f0f0f0f));
  const __m128i top_bits = _mm_and_si128(_mm_srli_epi16(top, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(_mm_or_si128(six, high_nibbles), top_bits);
}

}  // namespace
}  // namespace revis::quant

#endif
