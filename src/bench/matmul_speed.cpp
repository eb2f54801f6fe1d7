#include "bench/matmul_speed.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <vector>

#include "bench/bandwidth.h"
#include "bench/stats.h"
#include "model/matmul.h"
#include "model/striped_weights.h"
#include "model/weights.h"
#include "quant/quant.h"

namespace revis::bench {
namespace {

// Distinct random rows per matrix; the rest repeat them.
constexpr int64_t kDistinctRows = 64;

// The in-cache matrix: small enough for each of two threads' shares to stay
// in a 512 KiB L2, large enough that the thread pool's start and finish
// are a small part of a pass.
constexpr size_t kCacheMatrixBytes = 1 << 20;

// The prefill matrix: a few MiB, like a model's smaller projections.
constexpr size_t kPrefillMatrixBytes = 8 << 20;

// Each in-cache sample repeats its pass until at least this long, so that
// a sample is not one clock tick.
constexpr double kMinCacheSampleSeconds = 0.02;

// A matrix of `rows` rows whose bytes repeat the first kDistinctRows;
// with `striped`, also kept in stripes for the kernel backend that was
// active when matrix() last looked.
struct OwnedMatrix {
  std::vector<uint8_t> bytes;
  Matrix stored;
  bool striped = false;
  std::optional<KernelBackend> stripes_backend;  // of `in_stripes`, once made
  Matrix in_stripes;
  StripedWeights stripes;

  const Matrix& matrix() {
    if (!striped) return stored;
    if (stripes_backend != active_kernel_backend()) {
      in_stripes = stored;
      auto made = stripe_matrix(in_stripes);
      if (made.ok())
        stripes = std::move(*made);
      else
        in_stripes = stored;  // no memory: the stored rows
      stripes_backend = active_kernel_backend();
    }
    return in_stripes;
  }
};

OwnedMatrix repeated_matrix(const std::vector<uint8_t>& distinct, TensorType type, int64_t cols, int64_t rows,
                            bool striped) {
  OwnedMatrix m;
  const size_t row = row_bytes(type, cols);
  m.bytes.resize(row * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(distinct.begin() + static_cast<ptrdiff_t>((r % kDistinctRows) * row), row,
                m.bytes.begin() + static_cast<ptrdiff_t>(r * row));
  m.stored = {.type = type, .cols = cols, .rows = rows, .row_bytes = row, .data = m.bytes.data()};
  m.striped = striped;
  return m;
}

int64_t rows_for(size_t bytes, size_t row) { return std::max<int64_t>(kDistinctRows, static_cast<int64_t>(bytes / row)); }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

struct MatMulSpeed::State {
  ThreadPool* pool;
  MatMulSpeedOptions options;
  OwnedMatrix memory, cache, prefill;
  std::vector<float> activations, out;
  MatMul matmul;
};

Result<std::unique_ptr<MatMulSpeed>> MatMulSpeed::create(ThreadPool& pool, const MatMulSpeedOptions& options) {
  const TensorType type = options.type;
  if (type == TensorType::Q8_K || type == TensorType::Q8_1 || !(can_quantize(type) || can_quantize_with_importance(type)))
    return Status::error(std::string(type_name(type)) + " is not a weight type (it only holds activations)");
  const int64_t block = type_traits(type).block_size;
  if (options.cols <= 0 || options.cols % block != 0)
    return Status::error(std::string(type_name(type)) + ": rows of " + std::to_string(options.cols) +
                         " values are not whole blocks of " + std::to_string(block));
  if (options.prefill_tokens < 1) return Status::error("prefill tokens: expected >= 1");

  auto state = std::make_unique<State>();
  state->pool = &pool;
  const size_t row = row_bytes(type, options.cols);
  std::vector<uint8_t> distinct(row * kDistinctRows);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(options.cols));
  // The grid types have only the quantizer that weighs values; here all weigh the same.
  const std::vector<float> equal_importance(values.size(), 1.0f);
  for (int64_t r = 0; r < kDistinctRows; ++r) {
    for (float& v : values) v = normal(rng);
    if (quantize_needs_importance(type))
      quantize_row_with_importance(type, values.data(), distinct.data() + r * row, options.cols, equal_importance.data());
    else
      quantize_row(type, values.data(), distinct.data() + r * row, options.cols);
  }
  const int64_t cols = options.cols;
  state->memory = repeated_matrix(distinct, type, cols, rows_for(capped_buffer_bytes(options.memory_bytes), row), options.striped);
  state->cache = repeated_matrix(distinct, type, cols, rows_for(kCacheMatrixBytes, row), options.striped);
  state->prefill = repeated_matrix(distinct, type, cols, rows_for(kPrefillMatrixBytes, row), options.striped);
  state->activations.resize(static_cast<size_t>(options.prefill_tokens * options.cols));
  for (float& v : state->activations) v = normal(rng);
  // One output row per weight row and token, for whichever pass is the largest.
  state->out.resize(static_cast<size_t>(std::max({state->memory.stored.rows, state->cache.stored.rows,
                                                  options.prefill_tokens * state->prefill.stored.rows})));
  state->options = options;
  state->matmul.set_stepwise(options.stepwise);
  return std::unique_ptr<MatMulSpeed>(new MatMulSpeed(std::move(state)));
}

MatMulSpeed::MatMulSpeed(std::unique_ptr<State> state) : state_(std::move(state)) {}
MatMulSpeed::~MatMulSpeed() = default;

size_t MatMulSpeed::memory_matrix_bytes() const { return state_->memory.bytes.size(); }

double MatMulSpeed::decode_memory_gb_s(Prefetch how) {
  State& s = *state_;
  const Matrix& w = s.memory.matrix();
  s.matmul.set_prefetch(how);
  const auto start = std::chrono::steady_clock::now();
  s.matmul.run(*s.pool, w, s.activations.data(), 1, w.cols, s.out.data(), w.rows);
  return static_cast<double>(s.memory.bytes.size()) / seconds_since(start) / 1e9;
}

double MatMulSpeed::decode_cache_gb_s() {
  State& s = *state_;
  const Matrix& w = s.cache.matrix();
  s.matmul.set_prefetch(Prefetch::kIntoL2);
  s.matmul.run(*s.pool, w, s.activations.data(), 1, w.cols, s.out.data(), w.rows);  // into the caches
  int passes = 0;
  const auto start = std::chrono::steady_clock::now();
  double seconds = 0;
  do {
    s.matmul.run(*s.pool, w, s.activations.data(), 1, w.cols, s.out.data(), w.rows);
    ++passes;
    seconds = seconds_since(start);
  } while (seconds < kMinCacheSampleSeconds);
  return static_cast<double>(s.cache.bytes.size()) * passes / seconds / 1e9;
}

double MatMulSpeed::prefill_gops() {
  State& s = *state_;
  const Matrix& w = s.prefill.matrix();
  const int tokens = s.options.prefill_tokens;
  const auto start = std::chrono::steady_clock::now();
  s.matmul.run(*s.pool, w, s.activations.data(), tokens, w.cols, s.out.data(), w.rows);
  return static_cast<double>(tokens) * static_cast<double>(w.rows) * static_cast<double>(w.cols) /
         seconds_since(start) / 1e9;
}

Result<ArithmeticCeiling> arithmetic_ceiling(int n_threads, const std::map<std::string, uint64_t>& bytes_by_type,
                                             uint64_t bytes_per_token, int64_t cols, int samples, bool striped) {
  ThreadPool pool(n_threads);
  uint64_t total = 0;
  for (const auto& [name, bytes] : bytes_by_type) total += bytes;
  ArithmeticCeiling ceiling;
  double gen_seconds = 0, prefill_seconds = 0;
  for (const auto& [name, bytes] : bytes_by_type) {
    const std::optional<TensorType> type = type_from_name(name);
    if (!type || bytes == 0) continue;
    // Only the in-cache and prefill matrices are used: the one from memory
    // is kept to its least. A prompt meets the weights in chunks of 256
    // tokens (model.cpp).
    auto speed = MatMulSpeed::create(
        pool, {.type = *type, .cols = cols, .memory_bytes = 1, .prefill_tokens = 256, .striped = striped});
    if (!speed.ok()) continue;
    std::vector<double> cache, prefill;
    for (int i = 0; i < samples; ++i) {
      cache.push_back((*speed)->decode_cache_gb_s());
      prefill.push_back((*speed)->prefill_gops());
    }
    TypeSpeed& t = ceiling.by_type[name];
    t.token_bytes = static_cast<double>(bytes_per_token) * static_cast<double>(bytes) / static_cast<double>(total);
    t.cache_gb_s = summarize(cache).median;
    t.prefill_gops = summarize(prefill).median;
    const TypeTraits& traits = type_traits(*type);
    const double weights = t.token_bytes * static_cast<double>(traits.block_size) / static_cast<double>(traits.block_bytes);
    gen_seconds += t.token_bytes / (t.cache_gb_s * 1e9);
    prefill_seconds += weights / (t.prefill_gops * 1e9);
  }
  if (ceiling.by_type.empty()) return Status::error("no weight type of the model could be timed in rows of " + std::to_string(cols));
  ceiling.gen_tok_s = 1 / gen_seconds;
  ceiling.prefill_tok_s = 1 / prefill_seconds;
  return ceiling;
}

}  // namespace revis::bench
