// MatMul::run (tiles claimed by the pool's threads, tokens four at a time
// through vec_dot4's kernel) against the plain definition: every output is
// vec_dot of one weight row with one quantized token row, up to float
// summation order (the four-row kernels fold their integer sums in another
// order), |diff| <= 1e-5 * sum |w_i a_i|. A wrong row, token or stride
// would be off by the whole magnitude.
#include "model/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/striped_weights.h"
#include "quant/quant.h"
#include "quant/test_util.h"
#include "support/kernel_backends.h"

namespace revis {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> out(n);
  for (float& v : out) v = dist(rng);
  return out;
}

void expect_matmul_equals_vec_dots(TensorType type, int64_t rows, int64_t cols, int n_tokens, int n_threads,
                                   Prefetch prefetch = Prefetch::kIntoL2) {
  std::vector<float> weights = random_floats(static_cast<size_t>(rows * cols), 1);
  Matrix w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = row_bytes(type, cols);
  std::vector<uint8_t> data(w.row_bytes * rows);
  for (int64_t r = 0; r < rows; ++r) quantize_row(type, &weights[r * cols], &data[r * w.row_bytes], cols);
  w.data = data.data();

  // Strided input and output rows, as the forward pass uses them.
  const int64_t x_stride = cols + 3, out_stride = rows + 5;
  const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens * x_stride), 2);
  std::vector<float> out(static_cast<size_t>(n_tokens * out_stride), -7.0f);
  ThreadPool pool(n_threads);
  MatMul matmul;
  matmul.set_prefetch(prefetch);
  matmul.run(pool, w, x.data(), n_tokens, x_stride, out.data(), out_stride);

  const TensorType act_type = activation_type(type);
  std::vector<uint8_t> act(row_bytes(act_type, cols));
  std::vector<float> act_values(static_cast<size_t>(cols)), w_values(static_cast<size_t>(cols));
  for (int t = 0; t < n_tokens; ++t) {
    quantize_row(act_type, &x[t * x_stride], act.data(), cols);
    dequantize_row(act_type, act.data(), act_values.data(), cols);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(type, w.row(r), w_values.data(), cols);
      double magnitude = 0;
      for (int64_t i = 0; i < cols; ++i) magnitude += std::fabs(static_cast<double>(w_values[i]) * act_values[i]);
      const float expected = vec_dot(type, w.row(r), act.data(), cols);
      ASSERT_LE(std::fabs(static_cast<double>(out[t * out_stride + r]) - expected), 1e-5 * magnitude)
          << type_name(type) << " " << rows << "x" << cols << ", " << n_tokens << " tokens, " << n_threads
          << " threads: token " << t << " row " << r << ": " << out[t * out_stride + r] << " vs " << expected;
    }
    for (int64_t r = rows; r < out_stride; ++r) ASSERT_EQ(out[t * out_stride + r], -7.0f) << "wrote past the row";
  }
}

TEST(MatMul, EqualsRowByRowVecDot) {
  for (TensorType type :
       {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0, TensorType::Q4_0, TensorType::F16, TensorType::F32})
    for (int n_tokens : {1, 3, 4, 5, 9})
      for (int n_threads : {1, 2, 3}) expect_matmul_equals_vec_dots(type, 37, 512, n_tokens, n_threads);
}

TEST(MatMul, ManyTilesAndTokens) {
  // Rows of 2304 bytes. With 66 tokens (16 groups of four and two left
  // over) a group's activations (18.7 KiB) are too many for one slice: the
  // rows go in two slices of 2048 columns, 28 rows to a 32 KiB tile, and
  // every claim is one tile: 701 rows make 26, the last of one row. With 1
  // or 3 tokens the claims shrink from a quarter of the matrix down to a
  // tile (14 whole rows), and the rows ahead are prefetched: near the end
  // of a claim, rows of the thread's next claim, taken early (with 3
  // tokens, before the second and third pass over the current one).
  for (int n_tokens : {1, 3, 66}) expect_matmul_equals_vec_dots(TensorType::Q4_K, 701, 4096, n_tokens, 2);
}

TEST(MatMul, EveryPrefetchModeGivesTheSameProducts) {
  // Only the requests ahead differ (and without requests no claim is taken
  // early); 1 and 3 tokens take the single-token path.
  for (Prefetch prefetch : PrefetchTuner::kModes)
    for (int n_tokens : {1, 3}) expect_matmul_equals_vec_dots(TensorType::Q8_0, 701, 2048, n_tokens, 2, prefetch);
}

TEST(MatMul, LongRowsGoInSlices) {
  // A four-token group of 8192-value rows outgrows L1: 37 KiB in Q8_K (Q4_K
  // weights: three slices of 2816, 2816 and 2560 columns), 64 KiB in the
  // AVX-512 packed form of Q8_0 (four slices). 8224 = 257 blocks of 32 is
  // not whole super-blocks and stays in one piece. A single token (alone,
  // or left over after two groups) takes rows over 2.5 KiB in slices too,
  // each prefetched just before it: Q8_0 in four, Q6_K in three, Q4_K and
  // Q4_0 in two.
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0, TensorType::Q4_0})
    for (int n_tokens : {1, 4, 9}) expect_matmul_equals_vec_dots(type, 19, 8192, n_tokens, 2);
  expect_matmul_equals_vec_dots(TensorType::Q8_0, 19, 8224, 5, 2);
}

// Every backend the CPU has, with several token groups meeting each tile,
// for the packed forms that take weights in a layout of their own (AVX2's
// octets for the Q8_0-activation types: each tile is repacked once for
// all its groups; AVX-512's stripes of sixteen Q4_K, Q6_K or Q8_0 rows, 45 rows
// making two whole stripes and one of 13), and the one-token forms the tokens left over take
// (AVX2's activations with block sums and float scales for all six, in
// groups of four blocks). 10 tokens are two groups and two left over, 18 four and two.
// 2080 values end in a block past the last eight (and a group of four);
// 8192 go in slices.
TEST(MatMul, EqualsRowByRowVecDotOnEveryBackend) {
  for (KernelBackend backend : testing::supported_kernel_backends()) {
    const testing::ScopedKernelBackend scoped(backend);
    ASSERT_TRUE(scoped.ok());
    SCOPED_TRACE(kernel_backend_name(backend));
    for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q5_0, TensorType::IQ4_NL, TensorType::Q4_1,
                            TensorType::Q5_1})
      for (int64_t cols : {2080, 8192})
        for (int n_tokens : {10, 18}) expect_matmul_equals_vec_dots(type, 45, cols, n_tokens, 2);
    for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K})
      for (int64_t cols : {2048, 8192})
        for (int n_tokens : {10, 18}) expect_matmul_equals_vec_dots(type, 45, cols, n_tokens, 2);
  }
}

// A matrix of `type` holding random weights: quantized Gaussian rows, or
// for the types whose quantizer needs importance, random grid blocks.
struct RandomMatrix {
  Matrix w;
  std::vector<uint8_t> data;
  RandomMatrix(TensorType type, int64_t rows, int64_t cols) {
    w.type = type;
    w.rows = rows;
    w.cols = cols;
    w.row_bytes = row_bytes(type, cols);
    std::mt19937 rng(3);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<uint8_t> row(w.row_bytes);
      if (can_quantize(type))
        quantize_row(type, quant_test::gaussian(static_cast<size_t>(cols), static_cast<uint32_t>(r)).data(), row.data(),
                     cols);
      else
        row = quant_test::random_grid_row(type, cols, rng);
      data.insert(data.end(), row.begin(), row.end());
    }
    w.data = data.data();
  }
};

// Stepwise: a token's products carry the same bits alone, among other
// tokens, in any order: the property the model's batch invariance rests on
// for matrices without a stripe form (model.h), on every backend. 2 tokens
// alone, 9 in order and reversed; the results also equal vec_dot's within
// rounding (the single-token path may take its packed form).
TEST(MatMul, StepwiseGivesEveryTokenTheSameBitsInAnyCall) {
  std::vector<TensorType> types = quant_test::weight_types();
  types.insert(types.end(), quant_test::grid_types().begin(), quant_test::grid_types().end());
  constexpr int64_t kRows = 37, kCols = 1024;
  constexpr int kTokens = 9;
  const std::vector<float> x = random_floats(static_cast<size_t>(kTokens * kCols), 5);
  std::vector<float> reversed(x.size());
  for (int t = 0; t < kTokens; ++t) std::copy_n(&x[t * kCols], kCols, &reversed[(kTokens - 1 - t) * kCols]);
  ThreadPool pool(2);
  for (KernelBackend backend : testing::supported_kernel_backends()) {
    const testing::ScopedKernelBackend scoped(backend);
    ASSERT_TRUE(scoped.ok());
    for (TensorType type : types) {
      SCOPED_TRACE(std::string(kernel_backend_name(backend)) + " " + type_name(type));
      const RandomMatrix m(type, kRows, kCols);
      MatMul matmul;
      matmul.set_stepwise(true);
      std::vector<float> all(kTokens * kRows), backwards(kTokens * kRows), pair(2 * kRows);
      matmul.run(pool, m.w, x.data(), kTokens, kCols, all.data(), kRows);
      matmul.run(pool, m.w, reversed.data(), kTokens, kCols, backwards.data(), kRows);
      for (int t = 0; t < kTokens; ++t) {
        const float* expected = &all[t * kRows];
        ASSERT_EQ(std::memcmp(&backwards[(kTokens - 1 - t) * kRows], expected, kRows * sizeof(float)), 0)
            << "token " << t << " reversed";
        matmul.run(pool, m.w, &x[t * kCols], 1, kCols, pair.data(), kRows);
        ASSERT_EQ(std::memcmp(pair.data(), expected, kRows * sizeof(float)), 0) << "token " << t << " alone";
      }
      matmul.run(pool, m.w, &x[7 * kCols], 2, kCols, pair.data(), kRows);
      ASSERT_EQ(std::memcmp(pair.data(), &all[7 * kRows], 2 * kRows * sizeof(float)), 0) << "tokens 7 and 8";

      const TensorType act_type = activation_type(type);
      std::vector<uint8_t> act(row_bytes(act_type, kCols));
      quantize_row(act_type, &x[8 * kCols], act.data(), kCols);
      for (int64_t r = 0; r < kRows; ++r) {
        const float expected = vec_dot(type, m.w.row(r), act.data(), kCols);
        ASSERT_NEAR(all[8 * kRows + r], expected, 1e-4 * (std::fabs(expected) + 1.0f)) << "row " << r;
      }
    }
  }
}

// Matrices kept in stripes (striped_weights.h), on every backend with
// stripe forms: a stack of three matrices of 45 rows (two whole stripes of
// sixteen and one of 13, or five of eight and one of five) whose middle one
// is taken. Every token's products must carry the same bits alone, in
// pairs, among nine in order and reversed, and stepwise (what lets
// speculative decoding verify drafts in groups and a resumed prompt equal a
// cold one), and equal vec_dot of the stored rows within rounding. 8192
// values go in slices of columns. Where the stripe form has a lane_dot,
// the same rows stored as rows (a mapped file) and run stepwise give the
// same bits as the stripes for any number of tokens.
TEST(MatMul, StripedMatricesGiveEveryTokenTheSameBitsInAnyCall) {
  constexpr int64_t kRows = 45;
  constexpr int kTokens = 9, kMats = 3;
  ThreadPool pool(2);
  int striped_types = 0, lane_types = 0;
  for (KernelBackend backend : testing::supported_kernel_backends()) {
    const testing::ScopedKernelBackend scoped(backend);
    ASSERT_TRUE(scoped.ok());
    for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0, TensorType::Q4_0, TensorType::F16})
      for (int64_t cols : {2048, 8192}) {
        SCOPED_TRACE(std::string(kernel_backend_name(backend)) + " " + type_name(type) + " " + std::to_string(cols));
        const RandomMatrix stack(type, kRows * kMats, cols);
        ModelWeights weights;
        weights.output = stack.w;
        weights.output.rows = kRows;
        weights.output.n_mats = kMats;
        auto striped = stripe_weights(weights);
        ASSERT_TRUE(striped.ok()) << striped.status().message();
        const PackedDot* form = dot_kernels(type, cols).packed4;
        if (!form || form->weight_rows == 1) {
          EXPECT_EQ(striped->matrices, 0u);
          EXPECT_EQ(weights.output.stripes, nullptr);
          continue;
        }
        ASSERT_EQ(striped->matrices, 1u);
        ASSERT_EQ(weights.output.stripes, form);
        ++striped_types;
        const Matrix w = weights.output.slice(1);

        const std::vector<float> x = random_floats(static_cast<size_t>(kTokens * cols), 7);
        std::vector<float> reversed(x.size());
        for (int t = 0; t < kTokens; ++t) std::copy_n(&x[t * cols], cols, &reversed[(kTokens - 1 - t) * cols]);
        MatMul matmul;
        std::vector<float> all(kTokens * kRows), backwards(kTokens * kRows), stepwise(kTokens * kRows), pair(2 * kRows);
        matmul.run(pool, w, x.data(), kTokens, cols, all.data(), kRows);
        matmul.run(pool, w, reversed.data(), kTokens, cols, backwards.data(), kRows);
        matmul.set_stepwise(true);
        matmul.run(pool, w, x.data(), kTokens, cols, stepwise.data(), kRows);
        matmul.set_stepwise(false);
        ASSERT_EQ(std::memcmp(stepwise.data(), all.data(), all.size() * sizeof(float)), 0) << "stepwise";
        for (int t = 0; t < kTokens; ++t) {
          const float* expected = &all[t * kRows];
          ASSERT_EQ(std::memcmp(&backwards[(kTokens - 1 - t) * kRows], expected, kRows * sizeof(float)), 0)
              << "token " << t << " reversed";
          matmul.run(pool, w, &x[t * cols], 1, cols, pair.data(), kRows);
          ASSERT_EQ(std::memcmp(pair.data(), expected, kRows * sizeof(float)), 0) << "token " << t << " alone";
        }
        matmul.run(pool, w, &x[6 * cols], 2, cols, pair.data(), kRows);
        ASSERT_EQ(std::memcmp(pair.data(), &all[6 * kRows], 2 * kRows * sizeof(float)), 0) << "tokens 6 and 7";

        if (form->lane_dot) {
          ++lane_types;
          Matrix stored = stack.w;  // the middle matrix, as rows
          stored.rows = kRows;
          stored.data = stack.w.row(kRows);
          matmul.set_stepwise(true);
          std::vector<float> from_rows(kTokens * kRows);
          matmul.run(pool, stored, x.data(), kTokens, cols, from_rows.data(), kRows);  // tiles repacked
          ASSERT_EQ(std::memcmp(from_rows.data(), all.data(), all.size() * sizeof(float)), 0) << "rows, 9 tokens";
          for (int first : {0, 5, 8}) {  // 4, 3 and 1 tokens through lane_dot
            const int n = std::min(4, kTokens - first);
            matmul.run(pool, stored, &x[first * cols], n, cols, from_rows.data(), kRows);
            ASSERT_EQ(std::memcmp(from_rows.data(), &all[first * kRows], n * kRows * sizeof(float)), 0)
                << "rows, tokens from " << first;
          }
          matmul.set_stepwise(false);
        }

        const TensorType act_type = activation_type(type);
        std::vector<uint8_t> act(row_bytes(act_type, cols));
        for (int t : {0, 8}) {
          quantize_row(act_type, &x[t * cols], act.data(), cols);
          for (int64_t r = 0; r < kRows; ++r) {
            const float expected = vec_dot(type, stack.w.row(kRows + r), act.data(), cols);
            ASSERT_NEAR(all[t * kRows + r], expected, 1e-4 * (std::fabs(expected) + 1.0f)) << "token " << t << " row " << r;
          }
        }
      }
  }
#if defined(__x86_64__)
  if (kernel_backend_supported(KernelBackend::kAvx2)) EXPECT_GT(striped_types, 0);
  if (kernel_backend_supported(KernelBackend::kAvx512)) EXPECT_GT(lane_types, 0);
#endif
}

}  // namespace
}  // namespace revis
