// Collecting an importance matrix (imatrix_file.h) while a model runs: for
// every matrix of the file's blk.* tensors, the sum over the tokens of each
// input channel's squared activation, and how many tokens were summed; for
// a stack of experts, per expert, over the tokens routed to it. The output
// matrix is left out, as llama.cpp's imatrix tool does by default.
//
// Install it with Model::set_matmul_observer. It finds a product's tensor
// by the address of its weights in the mapped file, so matrices made at
// load (deepseek2's split attn_kv_b) are not collected. One thread at a
// time, as the model calls it.
#pragma once

#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/matmul.h"
#include "tools/imatrix_file.h"

namespace revis {

class ImatrixCollector : public MatmulObserver {
 public:
  // `file` must outlive the collector. `start` holds sums to continue from
  // (a partial run's file); its entries must match the file's shapes, which
  // add() checks when it meets them.
  ImatrixCollector(const gguf::GgufFile& file, Imatrix start);

  void on_matmul(const Matrix& w, const float* x, int n_tokens, int64_t x_stride) override;

  // The sums so far; the first error met (an entry of `start` whose shape
  // does not fit its tensor), if any.
  const Imatrix& imatrix() const { return imatrix_; }
  Imatrix& imatrix() { return imatrix_; }
  const Status& status() const { return status_; }

 private:
  struct Range {
    const uint8_t* begin;
    size_t bytes;
    size_t mat_bytes;  // one matrix of a stack
    int64_t cols, n_mat;
    std::string name;
  };
  std::vector<Range> ranges_;  // by begin
  Imatrix imatrix_;
  Status status_;
};

}  // namespace revis
