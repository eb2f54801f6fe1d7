// Rows in memory laid out as a session's KV cache holds them
// (Session::kv_runs): one run per (keys|values, layer, kv head), each of
// `capacity` positions, for the tests that write and read checkpoints
// without an engine.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kvstore/checkpoint_file.h"

namespace revis::kvstore {

struct RowBuffer {
  RowBuffer(const KvShape& shape, size_t capacity) {
    std::vector<size_t> widths;
    for (int part = 0; part < 2; ++part)
      for (uint32_t i = 0; i < shape.n_layer * shape.n_head_kv; ++i)
        widths.push_back((part == 0 ? shape.head_dim_k : shape.head_dim_v) * sizeof(uint16_t));
    size_t total = 0;
    for (size_t w : widths) total += w * capacity;
    bytes.resize(total);
    size_t at = 0;
    for (size_t w : widths) {
      runs.push_back({bytes.data() + at, w, capacity});
      at += w * capacity;
    }
  }
  RowBuffer(const RowBuffer&) = delete;

  // Distinct bytes everywhere, depending on the seed.
  void fill(int seed) {
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + seed + (i >> 9));
  }
  // Whether the first n positions of every run equal other's.
  bool same_rows(const RowBuffer& other, size_t n) const {
    if (runs.size() != other.runs.size()) return false;
    for (size_t r = 0; r < runs.size(); ++r)
      if (std::memcmp(runs[r].data, other.runs[r].data, n * runs[r].bytes_per_position) != 0) return false;
    return true;
  }

  std::vector<uint8_t> bytes;
  std::vector<KvRun> runs;
};

}  // namespace revis::kvstore
