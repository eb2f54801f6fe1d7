// Matrix multiplication of quantized weights with float activations:
// out[t][r] = dot(W row r, x[t]) for every token t of a batch.
//
// 1. The batch is converted once to the weight type's activation format
//    (quant.h's activation_type), by all the threads for longer batches.
// 2. The pool's threads claim runs of weight rows from a shared counter.
//    A claim takes a share of what is left, long at first (long runs
//    stream best from memory) and down to a tile of about 32 KiB at the
//    end, so that the threads finish together: one that runs slower
//    (another process on its core, a busier memory channel) just claims
//    less. With four or more tokens every claim is one tile, and a thread
//    claims its next tile early and has its rows fetched from memory while
//    it works on the current one.
// 3. Within a tile, tokens go four at a time through vec_dot4's kernel,
//    which unpacks each weight block once for the four (or its packed form,
//    where the backend has one: each group is then packed once per call,
//    and where that form takes weights in a layout of its own too, each
//    thread rewrites a tile's rows into it once, before the groups meet
//    them; a form that takes stripes of rows, as AVX-512's Q4_K does
//    sixteen at a time, has tiles of whole stripes).
//    Rows too long for a group's activations to stay in L1 go in slices of
//    columns, each slice's dots added to the last. The tile's rows
//    stay in L2 while the token groups pass over them, and a group's four
//    activation rows stay in L1 while the tile's rows pass. Tokens left
//    over after the groups of four (a generated token is one) use vec_dot's
//    kernel, or its packed form, each such token packed once per call;
//    there the rows ahead are prefetched as set_prefetch() says, a slice
//    of a long row at a time, and near the end of a claim from the
//    thread's next, claimed early.
//    Stepwise (set_stepwise), every token takes vec_dot's kernel, as a
//    call with that token alone would, so that its row is bit-identical to
//    such a call's whatever the other tokens of the call; the rows are
//    still read once, a tile at a time, while each token meets the tile in
//    turn. The model runs stepwise (model.h: batch invariance). Where the
//    backend's kernel for four tokens gives each the very bits of the
//    single-token kernel (quant.h's dot4_exact, or packed1's dot4), a
//    stepwise call still takes tokens four at a time through it, in the
//    single tokens' slices of columns and summed as theirs.
// A matrix kept in stripes (weights.h's Matrix::stripes) skips all that
// choosing: every group of four tokens, the last filled up with copies,
// meets whole stripes through the stripe form's dot, and a group of one
// through its dot_one, which gives the same bits; so stepwise changes
// nothing there. One group claims long runs of stripes, to
// stream them; several claim a tile of stripes each, as above.
// Stepwise, a matrix stored as rows (a mapped file) whose type has such a
// stripe form with a lane_dot (quant.h) takes the same path, each tile
// repacked into stripes by the thread that claims it, when the call has
// more than four tokens; fewer meet the stored rows through lane_dot, one
// token at a time. Either way every token gets the bits the stripes give.
// A matrix is thus read from memory once per call whatever the number of
// tokens: once per generated token, once per prompt chunk.
#pragma once

#include <cstdint>
#include <vector>

#include "model/prefetch_tuner.h"
#include "model/thread_pool.h"
#include "model/weights.h"

namespace revis {

// Sees the input of every matrix product, before it runs: for offline
// tools that study activations (imatrix_collector.h). Called on the thread
// that calls MatMul::run, never concurrently for one MatMul.
class MatmulObserver {
 public:
  virtual ~MatmulObserver() = default;
  // x: n_tokens rows of w.cols floats, x_stride apart.
  virtual void on_matmul(const Matrix& w, const float* x, int n_tokens, int64_t x_stride) = 0;
};

class MatMul {
 public:
  // x: n_tokens rows of w.cols floats (stride x_stride); out: n_tokens rows
  // of w.rows floats (stride out_stride).
  void run(ThreadPool& pool, const Matrix& w, const float* x, int n_tokens, int64_t x_stride, float* out,
           int64_t out_stride);

  // How single tokens ask for the rows ahead (prefetch_tuner.h); into L2
  // until set.
  void set_prefetch(Prefetch how) { prefetch_ = how; }

  // Whether every token takes the single-token kernel (matmul.h's step 3);
  // off until set.
  void set_stepwise(bool stepwise) { stepwise_ = stepwise; }

  // Shows every product's input to `observer` (null: none, the default).
  void set_observer(MatmulObserver* observer) { observer_ = observer; }

 private:
  // run() for a matrix kept in stripes of `form` (weights.h), or stored as
  // rows and repacked into them a tile at a time: every token through the
  // stripe form's kernels, four at a time or one by one alike.
  void run_striped(ThreadPool& pool, const Matrix& w, const PackedDot& form, const float* x, int n_tokens,
                   int64_t x_stride, float* out, int64_t out_stride);

  // One slice of the columns: n values at byte w_offset of a weight row
  // (w_bytes of it), met by the activations from byte act_offset.
  struct Slice {
    int64_t n;
    size_t w_offset, w_bytes, act_offset;
  };

  std::vector<uint8_t> activations_;         // reused between calls
  std::vector<uint8_t> packed_activations_;  // groups of four, where the kernels have a packed form
  std::vector<Slice> group_slices_, single_slices_;
  Prefetch prefetch_ = Prefetch::kIntoL2;
  bool stepwise_ = false;
  MatmulObserver* observer_ = nullptr;
};

}  // namespace revis
