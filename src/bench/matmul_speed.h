// Times MatMul, the product every weight matrix of a model goes through, on
// synthetic weights of one type and without a model, so that weight types
// and kernel backends can be compared on one machine in one run:
//   decode from memory  one token against a matrix far larger than the
//                       caches, as decoding meets its weights: GB/s of
//                       weights, for each way of asking for the rows ahead
//                       (model/prefetch_tuner.h)
//   decode from cache   one token against a matrix that stays in L2: what
//                       the kernel's arithmetic alone allows, GB/s
//   prefill             a batch of tokens against a matrix of a few MiB:
//                       billions of weight-value products per second
// Decoding is fast only while the cache figure stays well above the memory
// one: where they meet, arithmetic and memory take turns instead of
// overlapping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "model/prefetch_tuner.h"
#include "model/thread_pool.h"
#include "quant/types.h"
#include "revis/status.h"

namespace revis::bench {

struct MatMulSpeedOptions {
  TensorType type = TensorType::Q8_0;
  int64_t cols = 2048;                  // values per row (Llama-3.2-1B's width)
  size_t memory_bytes = size_t{1} << 30;  // the from-memory matrix, capped at a quarter of RAM
  int prefill_tokens = 64;
  // Each matrix kept in stripes of rows, as a model read into memory keeps
  // it (model/striped_weights.h), where the active backend has a stripe
  // form of the type; stored rows otherwise.
  bool striped = false;
  // Every token given the single-token bits, as a model runs its matrices
  // (model/matmul.h: stepwise); off: the fastest grouping.
  bool stepwise = false;
};

// The matrices and activations, built once (untimed): a few rows of random
// values quantized to the type and repeated to each matrix's size, which
// costs the kernels the same as distinct rows. Each call times one pass
// with whatever kernel backend is active.
class MatMulSpeed {
 public:
  // An error names the type when it cannot be a weight (Q8_K, Q8_1) or
  // cols is not a multiple of its block.
  static Result<std::unique_ptr<MatMulSpeed>> create(ThreadPool& pool, const MatMulSpeedOptions& options);
  ~MatMulSpeed();
  MatMulSpeed(const MatMulSpeed&) = delete;
  MatMulSpeed& operator=(const MatMulSpeed&) = delete;

  double decode_memory_gb_s(Prefetch how);
  double decode_cache_gb_s();  // rows ahead requested into L2
  double prefill_gops();
  size_t memory_matrix_bytes() const;

 private:
  struct State;
  explicit MatMulSpeed(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The arithmetic ceilings of a model's speed, beside the memory roofline:
// how fast its matrix products would run were every weight already in
// cache, from each weight type's kernel speed (MatMulSpeed's decode from
// cache and prefill) weighed by the type's share of what a token reads.
// Where this is close to the roofline the two take turns and a step runs
// below both; where it is lower, the arithmetic binds.
struct TypeSpeed {
  double token_bytes = 0;   // of the type, read per token
  double cache_gb_s = 0;    // one token, weights in cache (median of the samples)
  double prefill_gops = 0;  // a batch, G weight products per second (median)
};
struct ArithmeticCeiling {
  std::map<std::string, TypeSpeed> by_type;
  double gen_tok_s = 0;      // 1 / sum of token_bytes / cache speed
  double prefill_tok_s = 0;  // 1 / sum of the type's weights per token / prefill speed
};
// bytes_by_type: a file's tensor bytes per type name; a token reads
// bytes_per_token of them in those proportions (exact where every matrix
// is read once per token; for a mixture of experts, where the experts'
// types are read in proportion). The matrices' rows are `cols` wide (the
// model's width); types whose blocks do not divide it, or that cannot be
// weights, are left out.
// striped: as MatMulSpeedOptions::striped, for a model that keeps its
// matrices so. Runs on a thread pool of its own, of n_threads threads.
Result<ArithmeticCeiling> arithmetic_ceiling(int n_threads, const std::map<std::string, uint64_t>& bytes_by_type,
                                             uint64_t bytes_per_token, int64_t cols, int samples, bool striped);

}  // namespace revis::bench
