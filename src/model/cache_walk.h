// What attention and the KV cache's rings (kv_cache.h) must agree on: how
// many positions one forward pass writes to a sequence before it attends
// (a chunk of its tokens), and the tile of cache positions attention reads
// at a time. Tiles start at multiples of their size, whatever the batch, so
// that a token's output has the same bits however its prompt was chunked;
// a ring whose rows are a multiple of the tile never splits one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace revis {

// Tokens per pass through the layers in a forward call (model.cpp says why
// 256): the most positions of one sequence a pass writes before reading.
constexpr int kChunkTokens = 256;

// A tile's keys or values (16 KiB of halves) stay in L1 while every query
// of a block meets them, and its scores (queries x heads x tile floats, 128
// KiB at most for 64-halves rows) stay in L2 at any depth. At least 32
// positions, so that MLA's wide rows still fill whole tiles of kernel work.
constexpr size_t kAttentionTileBytes = 16 * 1024;
constexpr int kAttentionMinTile = 32;

// Positions per tile for cache rows of `row_halves` float16 values: a
// multiple of 8.
constexpr int attention_tile(int row_halves) {
  return std::max(kAttentionMinTile,
                  static_cast<int>(kAttentionTileBytes / (sizeof(uint16_t) * std::max(1, row_halves))) / 8 * 8);
}

}  // namespace revis
