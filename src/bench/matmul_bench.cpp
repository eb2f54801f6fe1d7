#include "bench/matmul_bench.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bandwidth.h"
#include "bench/matmul_speed.h"
#include "bench/stats.h"
#include "model/prefetch_tuner.h"
#include "model/thread_pool.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace revis::bench {
namespace {

constexpr int64_t kCols = 2048;  // values per row: Llama-3.2-1B's width
constexpr int kPrefillTokens = 64;

Result<std::vector<TensorType>> parse_types(const std::vector<std::string>& names) {
  std::vector<TensorType> types;
  for (const std::string& item : names) {
    const std::optional<TensorType> type = type_from_name(item);
    if (!type) return Status::error("--matmul: '" + item + "' is not a tensor type (expected e.g. q4_k,q6_k,q8_0)");
    if (std::find(types.begin(), types.end(), *type) == types.end()) types.push_back(*type);
  }
  return types;
}

// The backend --kernels names, or every SIMD backend this CPU has (the
// scalar reference only where there is none: it is for tests, not speed).
Result<std::vector<KernelBackend>> chosen_backends(const std::string& name) {
  if (!name.empty()) {
    auto backend = parse_kernel_backend(name);
    if (!backend.ok()) return Status::error("--kernels: " + backend.status().message());
    if (!kernel_backend_supported(*backend))
      return Status::error(std::string("--kernels: this CPU cannot run ") + kernel_backend_name(*backend));
    return std::vector<KernelBackend>{*backend};
  }
  std::vector<KernelBackend> backends;
  for (KernelBackend b : kKernelBackends)
    if (b != KernelBackend::kScalar && kernel_backend_supported(b)) backends.push_back(b);
  if (backends.empty()) backends.push_back(KernelBackend::kScalar);
  return backends;
}

// One type and backend's samples, a value per repetition. Decoding from
// memory is timed with each way of prefetching; memory_gb_s takes the
// fastest of each repetition, the one a model's decoding would settle on.
struct Samples {
  TensorType type;
  KernelBackend backend;
  std::vector<double> memory_gb_s = {}, memory_pct = {}, cache_gb_s = {}, prefill_gops = {};
  std::array<std::vector<double>, PrefetchTuner::kModes.size()> memory_by_prefetch = {};
};

nlohmann::json summary_json(const std::vector<double>& samples) {
  const Summary s = summarize(samples);
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}};
}

void print_report(const std::vector<Samples>& all, const std::vector<KernelBackend>& backends,
                  const std::vector<double>& bandwidth, int threads, size_t memory_bytes, int repetitions) {
  const Summary bw = summarize(bandwidth);
  std::printf("matmul       rows of %lld values, %d threads, %d runs; decode from memory over %.0f MiB\n", static_cast<long long>(kCols), threads,
              repetitions, memory_bytes / 1048576.0);
  std::printf("bandwidth    %.2f GB/s median of %zu read passes (best %.2f)\n", bw.median, bandwidth.size(), bw.max);
  std::printf("%-7s %-8s %-26s %7s %-26s %s\n", "type", "kernels", "decode, memory GB/s", "% bw", "decode, cache GB/s",
              "prefill (64 tokens), G products/s");
  auto cell = [](const std::vector<double>& v) {
    const Summary s = summarize(v);
    char text[64];
    std::snprintf(text, sizeof text, "%8.2f (%.2f-%.2f)", s.median, s.min, s.max);
    return std::string(text);
  };
  for (const Samples& s : all)
    std::printf("%-7s %-8s %-26s %7.1f %-26s %s\n", type_name(s.type), kernel_backend_name(s.backend),
                cell(s.memory_gb_s).c_str(), summarize(s.memory_pct).median, cell(s.cache_gb_s).c_str(),
                cell(s.prefill_gops).c_str());
  for (const Samples& s : all) {
    std::printf("prefetch     %s %s, decode from memory GB/s:", type_name(s.type), kernel_backend_name(s.backend));
    for (size_t m = 0; m < PrefetchTuner::kModes.size(); ++m)
      std::printf(" %s %.2f", prefetch_name(PrefetchTuner::kModes[m]), summarize(s.memory_by_prefetch[m]).median);
    std::printf(" (medians; the table takes each run's fastest)\n");
  }
  if (backends.size() < 2) return;
  // Ratios of medians against the first backend, from the same runs.
  for (const Samples& s : all) {
    if (s.backend == backends.front()) continue;
    const Samples& base = *std::find_if(all.begin(), all.end(), [&](const Samples& b) {
      return b.type == s.type && b.backend == backends.front();
    });
    auto ratio = [](const std::vector<double>& a, const std::vector<double>& b) {
      return summarize(a).median / summarize(b).median;
    };
    std::printf("ratio        %s %s / %s: decode memory %.2fx, cache %.2fx, prefill %.2fx\n", type_name(s.type),
                kernel_backend_name(s.backend), kernel_backend_name(base.backend),
                ratio(s.memory_gb_s, base.memory_gb_s), ratio(s.cache_gb_s, base.cache_gb_s),
                ratio(s.prefill_gops, base.prefill_gops));
  }
}

}  // namespace

Status run_matmul_bench(const MatMulBenchArgs& args) {
  auto types = parse_types(args.types);
  if (!types.ok()) return types.status();
  auto backends = chosen_backends(args.kernels);
  if (!backends.ok()) return backends.status();
  const int threads = args.threads > 0 ? args.threads : ThreadPool::default_threads();
  const KernelBackend original = active_kernel_backend();

  ThreadPool pool(threads);
  std::fprintf(stderr, "filling the bandwidth buffer ...\n");
  BandwidthProbe probe({.n_threads = threads, .buffer_bytes = args.memory_mib << 20});
  std::vector<double> bandwidth;  // every pass
  std::vector<Samples> all;
  size_t memory_bytes = 0;
  for (TensorType type : *types) {
    std::fprintf(stderr, "%s: building the matrices ...\n", type_name(type));
    auto speed = MatMulSpeed::create(
        pool, {.type = type,
               .cols = kCols,
               .memory_bytes = args.memory_mib << 20,
               .prefill_tokens = kPrefillTokens,
               .striped = args.striped,
               .stepwise = args.stepwise});
    if (!speed.ok()) return Status::error("--matmul: " + speed.status().message());
    MatMulSpeed& s = **speed;
    memory_bytes = s.memory_matrix_bytes();
    const size_t first = all.size();
    for (KernelBackend b : *backends) all.push_back({.type = type, .backend = b});
    for (int rep = -1; rep < args.repetitions; ++rep) {  // rep -1: an untimed warm-up
      const double best_pass = probe.best_pass(rep >= 0 ? &bandwidth : nullptr);
      for (size_t k = 0; k < backends->size(); ++k) {
        if (Status used = use_kernel_backend((*backends)[k]); !used.ok()) return Status::error("--kernels: " + used.message());
        std::array<double, PrefetchTuner::kModes.size()> by_prefetch;
        for (size_t m = 0; m < by_prefetch.size(); ++m) by_prefetch[m] = s.decode_memory_gb_s(PrefetchTuner::kModes[m]);
        const double memory = *std::max_element(by_prefetch.begin(), by_prefetch.end());
        const double cache = s.decode_cache_gb_s(), prefill = s.prefill_gops();
        if (rep < 0) continue;
        Samples& out = all[first + k];
        for (size_t m = 0; m < by_prefetch.size(); ++m) out.memory_by_prefetch[m].push_back(by_prefetch[m]);
        out.memory_gb_s.push_back(memory);
        out.memory_pct.push_back(100.0 * memory / best_pass);
        out.cache_gb_s.push_back(cache);
        out.prefill_gops.push_back(prefill);
        std::fprintf(stderr, "  run %d/%d, %s: decode %.2f GB/s from memory (%.0f %% of %.2f; fastest prefetch), %.2f from cache; "
                     "prefill %.2f G/s\n", rep + 1, args.repetitions, kernel_backend_name((*backends)[k]), memory,
                     100.0 * memory / best_pass, best_pass, cache, prefill);
      }
    }
  }
  if (Status restored = use_kernel_backend(original); !restored.ok()) return restored;

  if (args.json) {
    nlohmann::json results = nlohmann::json::array();
    for (const Samples& s : all) {
      nlohmann::json by_prefetch;
      for (size_t m = 0; m < PrefetchTuner::kModes.size(); ++m)
        by_prefetch[prefetch_name(PrefetchTuner::kModes[m])] = summary_json(s.memory_by_prefetch[m]);
      results.push_back({{"type", type_name(s.type)},
                         {"kernels", kernel_backend_name(s.backend)},
                         {"decode_memory_gb_s", summary_json(s.memory_gb_s)},
                         {"decode_memory_by_prefetch", by_prefetch},
                         {"decode_memory_pct_bandwidth", summary_json(s.memory_pct)},
                         {"decode_cache_gb_s", summary_json(s.cache_gb_s)},
                         {"prefill_gops", summary_json(s.prefill_gops)}});
    }
    const nlohmann::json j = {{"threads", threads},
                              {"cols", kCols},
                              {"prefill_tokens", kPrefillTokens},
                              {"r", args.repetitions},
                              {"memory_matrix_bytes", memory_bytes},
                              {"bandwidth_gb_s", summary_json(bandwidth)},
                              {"results", results}};
    std::printf("%s\n", j.dump().c_str());
    return {};
  }
  print_report(all, *backends, bandwidth, threads, memory_bytes, args.repetitions);
  return {};
}

}  // namespace revis::bench
