// CompressorCache: what deepseek4's compressing layers (config.h's
// Deepseek4) keep for one session besides their raw key-value rows, laid
// out so that a token costs a few KiB instead of hundreds.
//
// Each compressing layer has a compressor (the attention's) and, at ratio
// 4, the indexer's; each turns the state rows of a group of `ratio`
// positions (key parts and scores, float32) into one compressed key. Kept:
//   - compressed keys, one float16 row per completed group (exactly the
//     float16 rounding the forward pass applies to them);
//   - state rows for the groups still open, in a ring indexed by position:
//     a group's key needs its own rows and, at ratio 4, the first half of
//     the previous group's; kRewind more rows let a session take back its
//     last positions (rejected drafts) without losing what it needs;
//   - at every resume point (a multiple of resume_interval(), the largest
//     ratio, which the others divide: config.cpp accepts 4 and 128), a
//     copy of the state rows a continuation from there reads:
//     ratio 4's previous-group halves, since no group is open there.
// The state at any position n is then recoverable from the resume point at
// or below n by evaluating the tokens between them again (Session does),
// and at n itself from a copy of the ring taken there (tail()).
//
// Keys and resume copies are "runs" as Session::kv_runs describes them: an
// array whose rows each cover `stride` positions (the group, or the resume
// interval), padded so that the first n * bytes_per_position bytes hold
// every row completed by position n. A checkpoint of n tokens stores
// exactly those bytes, as it does the raw rows.
//
// Memory: ordinary vectors, zeroed when the session is made (V4 Flash: 10
// KiB a position of context and the 16 MiB ring), unlike the raw rows'
// pages, which cost nothing until used (kv_cache.h).
//
// Thread-safety: none; part of one session's KvCache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"
#include "revis/engine.h"

namespace revis {

class CompressorCache {
 public:
  // Positions back from the furthest one written to which a session can
  // return through the ring alone (no resume point, no re-evaluation).
  static constexpr int kRewind = 16;

  // The compressors of a layer: the attention's (kAttention) and, at
  // ratio 4, the indexer's (kIndexer).
  enum Which { kAttention = 0, kIndexer = 1 };

  // For a deepseek4 config with at least one compressing layer.
  CompressorCache(const ModelConfig& config, int n_ctx);
  // Whether a cache for `config` has one.
  static bool needed(const ModelConfig& config);

  // The ring's rows of `pos` for compressor `which` of `layer`: its key
  // parts and scores, state_width() floats each.
  float* state_parts(int layer, Which which, int pos) { return ring_row(unit(layer, which).parts, layer, which, pos); }
  float* state_scores(int layer, Which which, int pos) { return ring_row(unit(layer, which).scores, layer, which, pos); }
  // The compressed key of group `group` (positions [group, group + 1) x ratio).
  uint16_t* key(int layer, Which which, int group);
  // After the state rows of `pos` were written in every layer.
  void wrote(int pos);
  // After the key of the group ending at `pos` was made: at a resume point,
  // keeps the copy a continuation from there needs.
  void closed_group(int layer, Which which, int pos);

  // Multiples of this are resume points.
  int resume_interval() const { return interval_; }
  // The resume point a continuation at n restarts from without the ring.
  int resume_point_at_or_below(int n) const { return n / interval_ * interval_; }
  // Whether the next tokens may be evaluated at position n without more
  // rows: n is 0, or the ring holds every state row a continuation at n
  // reads (n within kRewind of the furthest position written since the
  // last restore, and not below that restore).
  bool can_continue(int n) const { return n == 0 || (n >= floor_ && n <= high_); }
  // The furthest position the state stands at: where a re-evaluation of
  // the tokens up to the history's end starts when can_continue() is false.
  int stands_at() const { return high_; }
  // Puts the ring back as it stood at resume point q (a multiple of
  // resume_interval(), at most the furthest position evaluated or read),
  // from its copy; q = 0 starts afresh.
  void restore_resume_point(int q);

  // The ring's rows a continuation at n reads, in position order (a fixed
  // number of floats per cache, tail_floats()): what a checkpoint and a
  // session's kept copies hold for "the state at n". save_tail needs
  // can_continue(n); restore_tail makes the state stand at n.
  size_t tail_floats() const { return tail_floats_; }
  void save_tail(int n, std::span<float> out) const;
  void restore_tail(int n, std::span<const float> in);

  // The keys, then the resume copies, layer by layer, as runs of n_ctx
  // positions (see above).
  void append_runs(std::vector<KvRun>& runs);
  size_t bytes() const;

  // Figures of a cache for `config`, without building one: bytes per
  // position of its runs, of its tail, and of its ring.
  static size_t bytes_per_position(const ModelConfig& config);
  static size_t tail_bytes(const ModelConfig& config);
  static size_t ring_bytes(const ModelConfig& config);
  static int resume_interval_of(const ModelConfig& config);

 private:
  // Rows every `stride` positions, padded to whole bytes per position.
  struct Strided {
    size_t row_bytes = 0, bytes_per_position = 0;
    int stride = 1;
    std::vector<uint8_t> data;
    Strided() = default;
    Strided(size_t row_bytes, int stride, int n_ctx);
    uint8_t* row(int index) { return data.data() + static_cast<size_t>(index) * stride * bytes_per_position; }
  };
  struct Unit {
    int ratio = 0, dim = 0, width = 0, span = 0, ring_rows = 0;
    bool overlap = false;  // ratio 4: a key reads the previous group's rows too
    std::vector<float> parts, scores;  // the ring: ring_rows x width
    Strided keys;                      // float16, dim per group
    Strided resume;                    // overlap only: ratio x dim parts, then as many scores
  };
  struct Layout {
    std::vector<Unit> units;
    std::vector<int> index;  // layer * 2 + which -> units, or -1
    int interval = 0;
  };
  static Layout layout(const ModelConfig& config, int n_ctx);

  const Unit& unit(int layer, Which which) const { return units_[index_[layer * 2 + which]]; }
  Unit& unit(int layer, Which which) { return units_[index_[layer * 2 + which]]; }
  float* ring_row(std::vector<float>& ring, int layer, Which which, int pos) {
    const Unit& u = unit(layer, which);
    return ring.data() + static_cast<size_t>(pos % u.ring_rows) * u.width;
  }

  int n_ctx_;
  std::vector<Unit> units_;
  std::vector<int> index_;
  int interval_ = 0;
  size_t tail_floats_ = 0;
  int floor_ = 0, high_ = 0;  // can_continue's bounds
};

}  // namespace revis
