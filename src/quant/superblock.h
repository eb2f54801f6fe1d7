// The loop shared by the scalar dot products of the 256-value super-block
// formats (k_quants.cpp, iq_quants.cpp) against Q8_K activations: each
// weight block is unpacked to plain integers once, then a per-format term
// turns the unpacked block and its activation block into a float.
//
// Internal to src/quant. Pure functions, safe from any thread.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace revis::quant {

// sum over the super-blocks b of term(w[b], unpacked w[b], a[b]); unpack
// (const Block&, Unpacked&) fills the integers, n is the row's value count.
template <typename Block, typename Unpacked, typename Unpack, typename Term>
float dot_superblocks(const void* w, const void* a, int64_t n, Unpack unpack, Term term) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  Unpacked u;
  float sum = 0;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    unpack(wb[b], u);
    sum += term(wb[b], u, ab[b]);
  }
  return sum;
}

}  // namespace revis::quant
