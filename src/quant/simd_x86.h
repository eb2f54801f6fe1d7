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

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"

namespace revis::quant {
namespace {

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

inline float half(uint16_t h) { return _cvtsh_ss(h); }

// What a one-token K-quant stripe kernel asks for ahead of itself: the
// bytes `ahead` past [p, p + bytes), a few lines at a time between its
// arithmetic. A matrix kept in stripes is streamed a call's width at a
// time, the next stripe right after this one, and one token's K-quant
// arithmetic is slow enough that the hardware prefetchers alone left its
// loads waiting on memory, while a whole stripe asked for before the call
// filled the queue of misses (Llama-3.2-1B Q4_K_M, AVX-512: 40-44 tok/s
// either way, 60-61 with this). Q8_0's lighter arithmetic streams as fast
// without it. Bits are not affected.
inline void stream_ahead(const uint8_t* p, size_t bytes, size_t ahead) {
  for (size_t offset = 0; offset < bytes; offset += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + ahead + offset), _MM_HINT_NTA);
}

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A super-block's scale d (a stored half) in float lane 0...
inline __m128 super_scale(uint16_t d) { return _mm_cvtph_ps(_mm_cvtsi32_si128(d)); }

// ...and for the grid types over 2^kShift, the format's fixed power of two.
template <int kShift>
inline __m128 grid_scale(uint16_t d) { return _mm_mul_ps(super_scale(d), _mm_set1_ps(1.0f / (1 << kShift))); }

// What a per-group offset of a 256-value format is scaled by:
enum class Offsets {
  kNone,       // x = d * scale * q
  kSameScale,  // dmin == d: the offset joins the integer sum
  kOwnScale,   // dmin is a separate float scale
};

// Q4_K/Q5_K's eight 6-bit scales and mins (layout in k_quants.cpp) as
// bytes: scales 0..7, then mins 0..7. Scales and mins 0..3 are the low 6
// bits of bytes 0..3 and 4..7; 4..7 take their low 4 bits from bytes 8..11
// (scales in the low nibbles, mins in the high) and their top 2 bits from
// the top of bytes 0..3 (scales) and 4..7 (mins).
// Decoded in both 128-bit halves of a 256-bit vector (the load broadcasts
// the field, which costs no shuffle), so that the AVX2 kernels can pick
// every scale and min with one in-lane shuffle.
inline __m256i scales_6bit_twice(const uint8_t* packed) {
  // 16 bytes from a 12-byte field: the 4 after it are the block's own quants.
  const __m256i v = _mm256_broadcastsi128_si256(load128(packed));
  const __m256i low = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11,  //
                                                              0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m256i top = _mm256_shuffle_epi8(v, _mm256_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7,  //
                                                              -1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m256i six = _mm256_and_si256(low, _mm256_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0,  //
                                                             63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const __m256i high_nibbles = _mm256_and_si256(_mm256_srli_epi16(low, 4), _mm256_setr_epi32(0, 0, 0, 0x0f0f0f0f, 0, 0, 0, 0x0f0f0f0f));
  const __m256i top_bits =
      _mm256_and_si256(_mm256_srli_epi16(top, 2), _mm256_setr_epi32(0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030));
  return _mm256_or_si256(_mm256_or_si256(six, high_nibbles), top_bits);
}

inline __m128i scales_6bit(const uint8_t* packed) { return _mm256_castsi256_si128(scales_6bit_twice(packed)); }

// Q2_K's sixteen 4-bit scales and mins, group order: the low and the high
// nibbles of its 16 scale bytes.
struct ScalesAndMins {
  __m128i scales, mins;
};

inline ScalesAndMins q2_k_scales(const uint8_t* packed) {
  const __m128i bytes = load128(packed);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  return {_mm_and_si128(bytes, nibble), _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble)};
}

// Q3_K's sixteen 6-bit scales (layout in blocks.h) as signed bytes in group
// order, the stored 32 taken off. Low nibbles of groups 0..7 / 8..15 are
// the low / high nibbles of bytes 0..7, the top 2 bits of group g in byte
// 8 + g % 4 at bit 2 * (g / 4): as words, group 4i + j takes nibble i / 2
// of word i % 2 and bits 2 * i of word 2, byte j.
inline __m128i q3_k_scales(const uint8_t* packed) {
  uint32_t word[3];
  std::memcpy(word, packed, sizeof word);
  auto group4 = [&](int i) {
    const uint32_t low = (word[i % 2] >> (4 * (i / 2))) & 0x0f0f0f0f;
    const uint32_t top = (word[2] >> (2 * i)) & 0x03030303;
    return static_cast<int>(low | (top << 4));
  };
  const __m128i stored = _mm_setr_epi32(group4(0), group4(1), group4(2), group4(3));
  return _mm_sub_epi8(stored, _mm_set1_epi8(32));
}

// One token's Q8_K activations for a packed one-token Q4_K kernel: each
// block as Q8_K's, its 256 values moved in 16-byte pieces, packed piece i
// being stored piece kOrder[i], so that the kernel's activation loads line
// up with the weight nibbles its loads unpack.
inline size_t q8_k_packed_bytes(int64_t n) { return static_cast<size_t>(n / kSuperBlock) * sizeof(BlockQ8_K); }

template <const int (&kOrder)[kSuperBlock / 16]>
void pack_q8_k_pieces(const void* a, size_t, int64_t n, void* packed) {
  const auto* in = static_cast<const BlockQ8_K*>(a);
  auto* out = static_cast<BlockQ8_K*>(packed);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    out[b].d = in[b].d;
    std::memcpy(out[b].bsums, in[b].bsums, sizeof out[b].bsums);
    for (int i = 0; i < kSuperBlock / 16; ++i) std::memcpy(out[b].qs + 16 * i, in[b].qs + 16 * kOrder[i], 16);
  }
}

}  // namespace
}  // namespace revis::quant

#endif
