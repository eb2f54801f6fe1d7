// revis bench -m MODEL: prefill and generation speed, time to first token,
// memory, and how close decoding comes to the machine's memory bandwidth
// (the roofline). Progress goes to stderr, results to stdout: a report, one
// JSON object with --json. With --depth D1,D2,... it times prefill and
// generation at each context depth instead (llama-bench -d): a CSV, or with
// --json one object whose top-level figures are the deepest depth's. revis bench --matmul TYPES times matrix products alone,
// without a model (bench/matmul_bench.h). --json-schema FILE times sampled
// generation with and without that schema's grammar (bench/grammar_cost.h).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bandwidth.h"
#include "bench/grammar_cost.h"
#include "bench/inference.h"
#include "bench/matmul_bench.h"
#include "bench/matmul_speed.h"
#include "bench/parallel.h"
#include "bench/stats.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "grammar/json_schema.h"
#include "node/weight_label.h"
#include "revis/kernels.h"

namespace revis::cli {
namespace {

// The warm-up faults the weights in and grows the scratch buffers to the
// prompt's size; a few decoding steps are enough for the decode path, and
// keep the untimed run short on slow machines.
constexpr int kWarmupGenerateSteps = 16;

// Timings per weight type for the arithmetic ceiling, whose median counts.
constexpr int kArithmeticSamples = 3;

struct BenchArgs {
  EngineFlags engine;  // -m, -t, --mmap, --device, -ngl
  std::string depths, kernels, matmul, json_schema, parallel;
  int n_prompt = 512, n_generate = 128, repetitions = 5, ctx = 0, batch_tokens = 256;
  uint64_t seed = 1;
  size_t bandwidth_mib = 1024;
  bool json = false, mlock = false, striped = false, stepwise = false;
};

// "512,2048,8192" -> ascending, distinct, positive counts (of `flag`).
Result<std::vector<int>> parse_counts(const std::string& text, const std::string& flag, const std::string& what,
                                      const std::string& example) {
  std::vector<int> counts;
  for (const std::string& item : split_list(text)) {
    int count = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), count);
    if (item.empty() || error != std::errc() || end != item.data() + item.size() || count <= 0)
      return Status::error(flag + ": '" + item + "' is not a positive " + what + " (expected e.g. " + example + ")");
    counts.push_back(count);
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

double mib(uint64_t bytes) { return bytes / 1048576.0; }

// Generation speed times the bytes each token reads, as a share of what the
// memory system can deliver: 100% means decoding is as fast as the weights
// can be streamed.
double roofline_pct(double gen_tok_s, uint64_t bytes_per_token, double bandwidth_gb_s) {
  return bandwidth_gb_s > 0 ? 100.0 * gen_tok_s * static_cast<double>(bytes_per_token) / (bandwidth_gb_s * 1e9) : 0;
}

nlohmann::json arithmetic_json(const bench::ArithmeticCeiling& a) {
  nlohmann::json by_type = nlohmann::json::object();
  for (const auto& [name, t] : a.by_type)
    by_type[name] = {{"token_bytes", t.token_bytes}, {"cache_gb_s", t.cache_gb_s}, {"prefill_gops", t.prefill_gops}};
  // Not gen_tok_s and prefill_tok_s: scripts that grep the report for the
  // measured speeds would find these first (keys come sorted).
  return {{"gen_ceiling_tok_s", a.gen_tok_s}, {"prefill_ceiling_tok_s", a.prefill_tok_s}, {"by_type", by_type}};
}

nlohmann::json spread_json(const bench::Summary& s) {
  return {{"min", s.min}, {"p25", s.p25}, {"p75", s.p75}, {"max", s.max}};
}

std::vector<double> collect(const std::vector<bench::RunTiming>& runs, double (*field)(const bench::RunTiming&)) {
  std::vector<double> values;
  for (const bench::RunTiming& r : runs) values.push_back(field(r));
  return values;
}

// The fields every model's JSON report opens with.
nlohmann::json setup_json(const ModelInfo& info, const BenchArgs& args, const std::string& kernels) {
  return {{"model", info.path},   {"name", info.name},        {"architecture", info.architecture},
          {"type", node::weight_label(info)}, {"n_ctx", info.n_ctx}, {"threads", info.n_threads},
          {"kernels", kernels},   {"n", args.n_generate},     {"r", args.repetitions},
          {"seed", args.seed},    {"weights", info.weights_copied ? "copied" : "mapped"},
          {"striped_matrices", info.striped_matrices}, {"device", info.device},
          {"gpu_layers", info.gpu_layers}};
}

// Speed at context depths (llama-bench -d): per depth, the prefill from
// empty to that depth and then n generated tokens after it.
int run_depths(Engine& engine, const BenchArgs& args, const std::vector<int>& depths, const std::string& kernels) {
  const std::vector<int32_t> prompt = bench::random_prompt(engine, depths.back(), args.seed);
  std::fprintf(stderr, "warm-up ...\n");
  const int warmup_prompt = std::min<int>(args.n_prompt, depths.back());
  if (auto w = bench::time_run(engine, std::span(prompt).first(warmup_prompt),
                               std::min(args.n_generate, kWarmupGenerateSteps));
      !w.ok())
    return fail(w.status().message());

  std::vector<std::vector<double>> prefill(depths.size()), generate(depths.size());
  for (int rep = 0; rep < args.repetitions; ++rep) {
    std::fprintf(stderr, "run %d/%d: filling to %d tokens\n", rep + 1, args.repetitions, depths.back());
    auto points = bench::time_frontiers(engine, prompt, depths, args.n_generate);
    if (!points.ok()) return fail(points.status().message());
    for (size_t i = 0; i < depths.size(); ++i) {
      const bench::FrontierTiming& p = (*points)[i];
      prefill[i].push_back(p.prefill_tok_s());
      generate[i].push_back(p.generate_tok_s());
      std::fprintf(stderr, "  depth %d: prefill %.2f tok/s, generation %.2f tok/s\n", p.depth, p.prefill_tok_s(),
                   p.generate_tok_s());
    }
  }
  const uint64_t peak_rss = bench::peak_rss_bytes();
  std::fprintf(stderr, "peak RSS %.1f MiB\n", mib(peak_rss));
  // Medians over the repetitions, one line (or object) per depth.
  if (args.json) {
    nlohmann::json j = setup_json(engine.info(), args, kernels);
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < depths.size(); ++i) {
      const bench::Summary p = bench::summarize(prefill[i]), g = bench::summarize(generate[i]);
      rows.push_back({{"depth", depths[i]}, {"prefill_tok_s", p.median}, {"gen_tok_s", g.median},
                      {"spread", {{"prefill_tok_s", spread_json(p)}, {"gen_tok_s", spread_json(g)}}},
                      {"runs", {{"prefill_tok_s", prefill[i]}, {"gen_tok_s", generate[i]}}}});
    }
    const nlohmann::json& deepest = rows.back();
    j["depth"] = deepest["depth"];
    j["prefill_tok_s"] = deepest["prefill_tok_s"];
    j["gen_tok_s"] = deepest["gen_tok_s"];
    j["depths"] = rows;
    j["peak_rss_bytes"] = peak_rss;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("depth,prefill_tok_s,gen_tok_s\n");
  for (size_t i = 0; i < depths.size(); ++i)
    std::printf("%d,%.3f,%.3f\n", depths[i], bench::summarize(prefill[i]).median,
                bench::summarize(generate[i]).median);
  return 0;
}

// Generation with and without the grammar of a JSON Schema, alternating so
// that a change in the machine's load hits both alike; medians of the
// per-run rates. The schema should not let the output complete within -n
// tokens (say, an array with a large minItems), or the constrained runs
// are shorter.
int run_grammar_cost(Engine& engine, const BenchArgs& args) {
  auto text = read_file(args.json_schema);
  if (!text.ok()) return fail(text.status().message());
  auto grammar = compile_json_schema_text(*text);
  if (!grammar.ok()) return fail(args.json_schema + ": " + grammar.status().message());
  const std::vector<int32_t> prompt = bench::random_prompt(engine, args.n_prompt, args.seed);
  std::fprintf(stderr, "warm-up ...\n");
  if (auto w = bench::time_run(engine, prompt, std::min(args.n_generate, kWarmupGenerateSteps)); !w.ok())
    return fail(w.status().message());
  std::vector<double> free_tok_s, constrained_tok_s, vocabulary_ms;
  int shortest = args.n_generate;
  for (int rep = 0; rep < args.repetitions; ++rep) {
    for (bool constrained : {false, true}) {
      auto run = bench::time_grammar_run(engine, prompt, args.n_generate, args.seed + rep, constrained ? *grammar : nullptr);
      if (!run.ok()) return fail(run.status().message());
      (constrained ? constrained_tok_s : free_tok_s).push_back(run->tok_s());
      if (constrained) {
        vocabulary_ms.push_back(run->vocabulary_ms);
        shortest = std::min(shortest, run->n_generated);
      }
      std::fprintf(stderr, "run %d/%d %s: %d tokens, %.2f tok/s\n", rep + 1, args.repetitions,
                   constrained ? "constrained" : "free", run->n_generated, run->tok_s());
    }
  }
  const double free_median = bench::summarize(free_tok_s).median;
  const double constrained_median = bench::summarize(constrained_tok_s).median;
  const double cost_pct = free_median > 0 ? 100.0 * (1.0 - constrained_median / free_median) : 0;
  const double trie_ms = bench::summarize(vocabulary_ms).median;
  if (args.json) {
    nlohmann::json j = {{"model", engine.info().path}, {"n_vocab", engine.info().n_vocab}, {"n", args.n_generate},
                        {"r", args.repetitions}, {"free_tok_s", free_median}, {"constrained_tok_s", constrained_median},
                        {"cost_pct", cost_pct}, {"vocabulary_ms", trie_ms}, {"shortest_constrained_run", shortest},
                        {"runs", {{"free_tok_s", free_tok_s}, {"constrained_tok_s", constrained_tok_s}}}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("model        %s (%d tokens in the vocabulary)\n", engine.info().path.c_str(), engine.info().n_vocab);
  std::printf("setup        %d threads, generate %d sampled tokens, %d runs of each after a warm-up\n",
              engine.info().n_threads, args.n_generate, args.repetitions);
  std::printf("free         %8.2f tok/s\n", free_median);
  std::printf("constrained  %8.2f tok/s   (%s)\n", constrained_median, args.json_schema.c_str());
  std::printf("cost         %8.1f %%\n", cost_pct);
  std::printf("vocabulary   %8.1f ms      (the token trie, built once per loaded model)\n", trie_ms);
  if (shortest < args.n_generate)
    std::printf("note: a constrained run completed its JSON after %d tokens; a schema that cannot end sooner "
                "gives steadier figures\n", shortest);
  return 0;
}

// --matmul TYPES: the kernels alone, without a model.
int run_matmul(const BenchArgs& args) {
  if (args.repetitions < 1) return usage_error("-r: " + std::to_string(args.repetitions) + " (expected >= 1)");
  if (args.bandwidth_mib < 1) return usage_error("--bandwidth-mib: expected >= 1");
  const Status run = bench::run_matmul_bench({.types = split_list(args.matmul),
                                              .kernels = args.kernels,
                                              .repetitions = args.repetitions,
                                              .threads = args.engine.threads,
                                              .memory_mib = args.bandwidth_mib,
                                              .json = args.json,
                                              .striped = args.striped,
                                              .stepwise = args.stepwise});
  return run.ok() ? 0 : fail(run.message());
}

// Streams served at once (--parallel 1,2,4,8): per count, that many
// random prompts of n_prompt tokens started together through one
// GenerationBatch, each generating n_generate tokens.
int run_parallel(Engine& engine, const BenchArgs& args, const std::vector<int>& counts) {
  auto prompts_for = [&](int streams) {
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < streams; ++i) prompts.push_back(bench::random_prompt(engine, args.n_prompt, args.seed + i));
    return prompts;
  };
  std::fprintf(stderr, "warm-up ...\n");
  if (auto w = bench::time_parallel(engine, prompts_for(1), std::min(args.n_generate, kWarmupGenerateSteps),
                                    args.batch_tokens);
      !w.ok())
    return fail(w.status().message());
  struct Row {
    int streams;
    bench::Summary aggregate, per_stream, ttft, ttft_max;
  };
  std::vector<Row> rows;
  for (int streams : counts) {
    const auto prompts = prompts_for(streams);
    std::vector<double> aggregate, per_stream, ttft, ttft_max;
    for (int rep = 0; rep < args.repetitions; ++rep) {
      auto run = bench::time_parallel(engine, prompts, args.n_generate, args.batch_tokens);
      if (!run.ok()) return fail(run.status().message());
      const bench::Summary stream = bench::summarize(run->stream_tok_s), first = bench::summarize(run->ttft_ms);
      std::fprintf(stderr, "%d streams, run %d/%d: %.2f tok/s in all, %.2f per stream, TTFT %.0f ms (max %.0f)\n",
                   streams, rep + 1, args.repetitions, run->aggregate_tok_s(), stream.median, first.median, first.max);
      aggregate.push_back(run->aggregate_tok_s());
      per_stream.push_back(stream.median);
      ttft.push_back(first.median);
      ttft_max.push_back(first.max);
    }
    rows.push_back({streams, bench::summarize(aggregate), bench::summarize(per_stream), bench::summarize(ttft),
                    bench::summarize(ttft_max)});
  }
  const ModelInfo& info = engine.info();
  if (args.json) {
    nlohmann::json j = setup_json(info, args, kernels::active());
    j["p"] = args.n_prompt;
    j["batch_tokens"] = args.batch_tokens;
    for (const Row& r : rows)
      j["parallel"].push_back({{"streams", r.streams},
                               {"aggregate_tok_s", r.aggregate.median},
                               {"stream_tok_s", r.per_stream.median},
                               {"ttft_ms", r.ttft.median},
                               {"ttft_max_ms", r.ttft_max.median}});
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("model        %s (%s, %s)\n", info.path.c_str(), info.architecture.c_str(), node::weight_label(info).c_str());
  std::printf("setup        %d threads, %s kernels, prompt %d, generate %d per stream, %d runs, %d tokens per step\n",
              info.n_threads, kernels::active().c_str(), args.n_prompt, args.n_generate, args.repetitions,
              args.batch_tokens);
  std::printf("%8s %16s %16s %12s %12s %10s\n", "streams", "aggregate tok/s", "per-stream tok/s", "TTFT ms",
              "TTFT max ms", "vs first");
  for (const Row& r : rows)
    std::printf("%8d %16.2f %16.2f %12.1f %12.1f %9.2fx\n", r.streams, r.aggregate.median, r.per_stream.median,
                r.ttft.median, r.ttft_max.median,
                rows.front().aggregate.median > 0 ? r.aggregate.median / rows.front().aggregate.median : 0);
  std::printf("(medians over the runs; aggregate: every stream's tokens over the wall time from the common start)\n");
  return 0;
}

int run_bench(const BenchArgs& args) {
  if (!args.matmul.empty()) return run_matmul(args);
  if (args.engine.model.empty()) return usage_error("bench: -m MODEL is required (or --matmul TYPES, to time the kernels alone)");
  if (args.n_prompt < 1) return usage_error("-p: " + std::to_string(args.n_prompt) + " (expected >= 1)");
  if (args.n_generate < 1) return usage_error("-n: " + std::to_string(args.n_generate) + " (expected >= 1)");
  if (args.repetitions < 1) return usage_error("-r: " + std::to_string(args.repetitions) + " (expected >= 1)");
  if (args.bandwidth_mib < 1) return usage_error("--bandwidth-mib: expected >= 1");
  std::vector<int> streams;
  if (!args.parallel.empty()) {
    auto parsed = parse_counts(args.parallel, "--parallel", "stream count", "1,2,4,8");
    if (!parsed.ok()) return fail(parsed.status().message());
    streams = *parsed;
  }
  if (args.batch_tokens < 1) return usage_error("--batch-tokens: expected >= 1");
  std::vector<int> depths;
  if (!args.depths.empty()) {
    auto parsed = parse_counts(args.depths, "--depth", "token count", "512,2048,8192");
    if (!parsed.ok()) return fail(parsed.status().message());
    depths = *parsed;
  }
  if (!args.kernels.empty()) {
    if (Status used = kernels::use(args.kernels); !used.ok()) return fail("--kernels: " + used.message());
  }
  const std::string active_kernels = kernels::active();

  // Exactly the positions the runs fill, unless the user asks for more.
  const int needed_ctx = (depths.empty() ? args.n_prompt : depths.back()) + args.n_generate;
  if (args.ctx > 0 && args.ctx < needed_ctx)
    return fail("-c " + std::to_string(args.ctx) + " is too small: the benchmark fills " +
                std::to_string(needed_ctx) + " positions (leave -c out to size it automatically)");
  EngineOptions options = args.engine.options(args.ctx > 0 ? args.ctx : needed_ctx);
  options.mlock = args.mlock;
  auto engine = load_engine(options);
  if (!engine) return 1;
  const ModelInfo& info = engine->info();
  if (args.mlock && !info.mlock_failure.empty())
    std::fprintf(stderr, "warning: --mlock: %s; continuing with unlocked weights\n", info.mlock_failure.c_str());

  if (!streams.empty()) return run_parallel(*engine, args, streams);
  if (!depths.empty()) return run_depths(*engine, args, depths, active_kernels);
  if (!args.json_schema.empty()) return run_grammar_cost(*engine, args);

  const std::vector<int32_t> prompt = bench::random_prompt(*engine, args.n_prompt, args.seed);
  std::fprintf(stderr, "warm-up ...\n");
  if (auto w = bench::time_run(*engine, prompt, std::min(args.n_generate, kWarmupGenerateSteps)); !w.ok())
    return fail(w.status().message());
  // The model's peak: after the warm-up, before the bandwidth buffer exists.
  const uint64_t peak_rss = bench::peak_rss_bytes();

  // The bandwidth is measured before each run and after the last, the best
  // of a few passes each time (BandwidthProbe::best_pass). Each run's roofline
  // divides by the better of the two measurements beside it, so that speed
  // and bandwidth come from the same minutes of a machine whose other
  // tenants come and go.
  std::fprintf(stderr, "filling the bandwidth buffer ...\n");
  bench::BandwidthProbe probe({.n_threads = info.n_threads, .buffer_bytes = args.bandwidth_mib << 20});
  std::vector<double> pass_gb_s;  // every pass, for the report
  std::vector<double> probe_gb_s{probe.best_pass(&pass_gb_s)};
  std::vector<bench::RunTiming> runs;
  double run_cpu_seconds = 0, run_wall_seconds = 0;
  for (int rep = 0; rep < args.repetitions; ++rep) {
    const double cpu_before = bench::process_cpu_seconds();
    const auto wall_before = std::chrono::steady_clock::now();
    auto run = bench::time_run(*engine, prompt, args.n_generate);
    if (!run.ok()) return fail(run.status().message());
    run_wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_before).count();
    run_cpu_seconds += bench::process_cpu_seconds() - cpu_before;
    probe_gb_s.push_back(probe.best_pass(&pass_gb_s));
    std::fprintf(stderr, "run %d/%d: prefill %.2f tok/s, generation %.2f tok/s, TTFT %.0f ms, bandwidth %.2f GB/s\n",
                 rep + 1, args.repetitions, run->prefill_tok_s(), run->generate_tok_s(), run->ttft_ms,
                 probe_gb_s.back());
    runs.push_back(*run);
  }
  const double cpu_share_pct = 100.0 * run_cpu_seconds / (run_wall_seconds * info.n_threads);

  const std::vector<double> prefill_tok_s = collect(runs, [](const bench::RunTiming& r) { return r.prefill_tok_s(); });
  const std::vector<double> gen_tok_s = collect(runs, [](const bench::RunTiming& r) { return r.generate_tok_s(); });
  const std::vector<double> ttft_ms = collect(runs, [](const bench::RunTiming& r) { return r.ttft_ms; });
  std::vector<double> run_bandwidth, run_roofline;
  for (size_t i = 0; i < runs.size(); ++i) {
    run_bandwidth.push_back(std::max(probe_gb_s[i], probe_gb_s[i + 1]));
    run_roofline.push_back(roofline_pct(gen_tok_s[i], info.bytes_per_token, run_bandwidth.back()));
  }
  const bench::Summary prefill = bench::summarize(prefill_tok_s), gen = bench::summarize(gen_tok_s),
                       ttft = bench::summarize(ttft_ms), bandwidth = bench::summarize(pass_gb_s),
                       roofline = bench::summarize(run_roofline);
  const bool locked = args.mlock && info.mlock_failure.empty();
  // The arithmetic ceilings beside the roofline (matmul_speed.h), timed
  // after the runs so as not to warm their caches.
  std::fprintf(stderr, "timing the kernels with the weights in cache ...\n");
  auto arithmetic = bench::arithmetic_ceiling(info.n_threads, info.tensor_bytes_by_type, info.bytes_per_token,
                                              info.n_embd, kArithmeticSamples, info.striped_matrices > 0);
  if (!arithmetic.ok()) std::fprintf(stderr, "warning: no arithmetic ceiling: %s\n", arithmetic.status().message().c_str());

  if (args.json) {
    nlohmann::json j = setup_json(info, args, active_kernels);
    j.update({
        {"file_type", info.file_type},
        {"tensor_bytes_by_type", info.tensor_bytes_by_type},
        {"n_layer", info.n_layer},
        {"n_embd", info.n_embd},
        {"n_vocab", info.n_vocab},
        {"file_bytes", info.file_bytes},
        {"bytes_per_token", info.bytes_per_token},
        {"p", args.n_prompt},
        {"mlock", locked},
        {"prefill_tok_s", prefill.median},
        {"gen_tok_s", gen.median},
        {"ttft_ms", ttft.median},
        {"spread", {{"prefill_tok_s", spread_json(prefill)}, {"gen_tok_s", spread_json(gen)},
                    {"ttft_ms", spread_json(ttft)}}},
        {"runs", {{"prefill_tok_s", prefill_tok_s}, {"gen_tok_s", gen_tok_s}, {"ttft_ms", ttft_ms},
                  {"bandwidth_gb_s", run_bandwidth}, {"roofline_pct", run_roofline}}},
        {"peak_rss_bytes", peak_rss},
        {"bandwidth_gb_s", bandwidth.max},
        {"bandwidth_median_gb_s", bandwidth.median},
        {"bandwidth_buffer_bytes", probe.buffer_bytes()},
        {"roofline_pct", roofline.median},
        {"cpu_share_pct", cpu_share_pct},
        {"arithmetic", arithmetic.ok() ? arithmetic_json(*arithmetic) : nlohmann::json()},
    });
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("model        %s (%s, %s, %d layers, %.1f MiB file)\n", info.path.c_str(), info.architecture.c_str(),
              node::weight_label(info).c_str(), info.n_layer, mib(info.file_bytes));
  std::printf("setup        %d threads, %s kernels, prompt %d, generate %d, %d runs after a warm-up, weights %s%s\n",
              info.n_threads, active_kernels.c_str(), args.n_prompt, args.n_generate, args.repetitions,
              weights_place(info).c_str(), locked ? " and locked" : "");
  std::printf("prefill      %8.2f tok/s   (min %.2f, max %.2f)\n", prefill.median, prefill.min, prefill.max);
  std::printf("generation   %8.2f tok/s   (min %.2f, max %.2f)\n", gen.median, gen.min, gen.max);
  std::printf("TTFT         %8.1f ms      (min %.1f, max %.1f)\n", ttft.median, ttft.min, ttft.max);
  std::printf("peak RSS     %8.1f MiB\n", mib(peak_rss));
  std::printf("bytes/token  %8.1f MiB     (weights read per generated token)\n", mib(info.bytes_per_token));
  std::printf("bandwidth    %8.2f GB/s    (best of %zu passes over %.0f MiB, %d threads, around the runs; median %.2f)\n",
              bandwidth.max, pass_gb_s.size(), mib(probe.buffer_bytes()), probe.n_threads(), bandwidth.median);
  std::printf("roofline     %8.1f %%       (generation x bytes/token / bandwidth, per run against the passes beside it;"
              " min %.1f, max %.1f)\n",
              roofline.median, roofline.min, roofline.max);
  std::printf("CPU share    %8.1f %%       (CPU time of the timed runs / (wall time x %d threads))\n",
              cpu_share_pct, info.n_threads);
  if (!arithmetic.ok()) return 0;
  std::string per_type;
  for (const auto& [name, t] : arithmetic->by_type)
    per_type += (per_type.empty() ? "" : ", ") + name + " " + std::to_string(static_cast<int>(t.cache_gb_s + 0.5)) + " GB/s";
  std::printf("arithmetic   %8.2f tok/s   (generation with every weight in cache: %s; prefill %.2f tok/s)\n",
              arithmetic->gen_tok_s, per_type.c_str(), arithmetic->prefill_tok_s);
  return 0;
}

}  // namespace

void register_bench(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("bench", "Measure prefill and generation speed against the memory-bandwidth roofline");
  auto args = std::make_shared<BenchArgs>();
  // The options that only a model's run reads; --matmul refuses them.
  std::vector<CLI::Option*> model_only;
  model_only.push_back(cmd->add_option("-m,--model", args->engine.model, "GGUF model file"));
  model_only.push_back(
      cmd->add_option("-p,--n-prompt", args->n_prompt, "Prompt tokens to prefill per run")->capture_default_str());
  model_only.push_back(cmd->add_option("-n,--n-gen", args->n_generate, "Tokens to generate per run")->capture_default_str());
  cmd->add_option("-r,--repetitions", args->repetitions, "Timed runs (medians are reported)")->capture_default_str();
  cmd->add_option("-t,--threads", args->engine.threads, "Threads, for the model and the bandwidth test (default: physical cores)");
  model_only.push_back(cmd->add_option("-c,--ctx-size", args->ctx, "Context size (default: exactly what the runs fill)"));
  model_only.push_back(cmd->add_option("--seed", args->seed, "Seed for the random prompt tokens")->capture_default_str());
  cmd->add_option("--bandwidth-mib", args->bandwidth_mib,
                  "Buffer for the bandwidth test, and --matmul's matrix from memory, MiB (at most a quarter of RAM)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object instead of the report");
  auto* depth = cmd->add_option("-d,--depth,--frontiers", args->depths,
                                "Context depths, e.g. 4096,16384: prefill to each and generate after it (a CSV, "
                                "or with --json the deepest depth's figures and a row per depth)");
  model_only.push_back(depth);
  auto* parallel = cmd->add_option("--parallel", args->parallel,
                                   "Streams served at once, e.g. 1,2,4,8: per count, that many prompts start "
                                   "together and share each forward pass (aggregate and per-stream tok/s, TTFT)")
                       ->excludes(depth);
  model_only.push_back(parallel);
  model_only.push_back(cmd->add_option("--batch-tokens", args->batch_tokens,
                                       "With --parallel: tokens per forward pass (prompt chunks fill what the "
                                       "decoding streams leave)")
                           ->capture_default_str()
                           ->needs(parallel));
  model_only.push_back(cmd->add_flag("--mlock", args->mlock, "Lock the weights in RAM (a warning if the system refuses)"));
  for (CLI::Option* option : add_engine_flags(*cmd, args->engine)) model_only.push_back(option);
  model_only.push_back(cmd->add_option("--json-schema", args->json_schema,
                                       "Time sampled generation with and without this JSON Schema's grammar (its cost)")
                           ->excludes(depth)
                           ->excludes(parallel));
  auto* matmul = cmd->add_option("--matmul", args->matmul,
                                 "Weight types, e.g. q4_k,q6_k,q8_0: instead of a model, time matrix products of each "
                                 "(decoding from memory and from cache, a 64-token prefill) with every kernel backend "
                                 "this CPU has");
  for (CLI::Option* option : model_only) matmul->excludes(option);
  cmd->add_flag("--stripes", args->striped,
                "With --matmul: keep each matrix in stripes of rows where the kernels have a stripe form, as a "
                "model read into memory does")
      ->needs(matmul);
  cmd->add_flag("--stepwise", args->stepwise,
                "With --matmul: give every token the bits it would get alone, as a model's products do (batch "
                "invariance); without --stripes, as a model read from a mapped file does")
      ->needs(matmul);
  cmd->add_option("--kernels", args->kernels,
                  "Kernel backend: scalar, avx2, avx512 or neon (default: the best this CPU has), to compare them");
  cmd->callback([args, &exit_code] { exit_code = run_bench(*args); });
}

}  // namespace revis::cli
