// End-to-end tests of `revis bench`: the figures are present, positive and
// agree with each other. Speeds depend on the machine and its load, so no
// test asserts how fast anything is.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/run_command.h"

namespace revis {
namespace {

using testing::run_revis;
using testing::shell_quote;

const std::string kModel = testing::testdata("models/llama-spm-Q8_0.gguf").string();
// A small bandwidth buffer keeps the test light; it is still far larger than
// the caches of the machines the tests run on.
const std::string kSmallRun = " -p 32 -n 8 -r 2 -t 2 --bandwidth-mib 256";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

TEST(BenchCommand, JsonFiguresArePositiveAndConsistent) {
  const auto r = run_revis("bench -m " + shell_quote(kModel) + kSmallRun + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);

  EXPECT_EQ(j["p"], 32);
  EXPECT_EQ(j["n"], 8);
  EXPECT_EQ(j["r"], 2);
  EXPECT_EQ(j["threads"], 2);
  EXPECT_EQ(j["type"], "Q8_0");
  EXPECT_EQ(j["model"], kModel);
  EXPECT_EQ(j["file_bytes"].get<uint64_t>(), std::filesystem::file_size(kModel));
  EXPECT_GT(j["bytes_per_token"].get<uint64_t>(), 0u);
  EXPECT_LE(j["bytes_per_token"].get<uint64_t>(), j["file_bytes"].get<uint64_t>());
  EXPECT_GE(j["n_ctx"].get<int>(), 32 + 8) << "the context is sized to hold the prompt and the generated tokens";

  for (const char* key : {"prefill_tok_s", "gen_tok_s", "ttft_ms", "bandwidth_gb_s", "roofline_pct", "cpu_share_pct"})
    EXPECT_GT(j[key].get<double>(), 0.0) << key;
  EXPECT_GT(j["peak_rss_bytes"].get<uint64_t>(), 0u);

  // Each run's roofline is derived from its own speed and bandwidth, the
  // reported one is their median (of two: the mean), and no run's bandwidth
  // exceeds the best pass.
  std::vector<double> rooflines;
  ASSERT_EQ(j["runs"]["bandwidth_gb_s"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const double bandwidth = j["runs"]["bandwidth_gb_s"][i].get<double>();
    EXPECT_LE(bandwidth, j["bandwidth_gb_s"].get<double>()) << "run " << i;
    const double expected = 100.0 * j["runs"]["gen_tok_s"][i].get<double>() * j["bytes_per_token"].get<double>() /
                            (bandwidth * 1e9);
    EXPECT_NEAR(j["runs"]["roofline_pct"][i].get<double>(), expected, 1e-6 * expected) << "run " << i;
    rooflines.push_back(expected);
  }
  EXPECT_NEAR(j["roofline_pct"].get<double>(), (rooflines[0] + rooflines[1]) / 2, 1e-6 * rooflines[0]);

  // The arithmetic ceiling: every type of the file timed, their shares of
  // a token's bytes adding up to bytes_per_token, and the ceiling what
  // those bytes take at each type's in-cache speed.
  const nlohmann::json& arithmetic = j["arithmetic"];
  ASSERT_TRUE(arithmetic.is_object()) << j.dump();
  EXPECT_EQ(arithmetic["by_type"].size(), j["tensor_bytes_by_type"].size()) << arithmetic.dump();
  double token_bytes = 0, seconds = 0;
  for (const auto& [name, t] : arithmetic["by_type"].items()) {
    EXPECT_TRUE(j["tensor_bytes_by_type"].contains(name)) << name;
    EXPECT_GT(t["cache_gb_s"].get<double>(), 0.0) << name;
    EXPECT_GT(t["prefill_gops"].get<double>(), 0.0) << name;
    token_bytes += t["token_bytes"].get<double>();
    seconds += t["token_bytes"].get<double>() / (t["cache_gb_s"].get<double>() * 1e9);
  }
  EXPECT_NEAR(token_bytes, j["bytes_per_token"].get<double>(), 1e-6 * token_bytes);
  EXPECT_NEAR(arithmetic["gen_ceiling_tok_s"].get<double>(), 1 / seconds, 1e-6 / seconds);
  EXPECT_GT(arithmetic["prefill_ceiling_tok_s"].get<double>(), 0.0);

  // scripts/bench-vs-llama-cpp.sh takes the first "key": number of the
  // text: for the speeds, the measured ones.
  for (const char* key : {"prefill_tok_s", "gen_tok_s"}) {
    const size_t at = r.out.find("\"" + std::string(key) + "\":");
    ASSERT_NE(at, std::string::npos) << key;
    EXPECT_EQ(std::stod(r.out.substr(r.out.find(':', at) + 1)), j[key].get<double>()) << key;
  }

  // One entry per run, and each median lies within its runs' range.
  for (const char* key : {"prefill_tok_s", "gen_tok_s", "ttft_ms"}) {
    const std::vector<double> runs = j["runs"][key].get<std::vector<double>>();
    ASSERT_EQ(runs.size(), 2u) << key;
    const auto [lowest, highest] = std::minmax_element(runs.begin(), runs.end());
    EXPECT_GE(j[key].get<double>(), *lowest) << key;
    EXPECT_LE(j[key].get<double>(), *highest) << key;
    EXPECT_EQ(j["spread"][key]["min"].get<double>(), *lowest) << key;
    EXPECT_EQ(j["spread"][key]["max"].get<double>(), *highest) << key;
  }
  // Time to first token includes the whole prefill.
  for (size_t i = 0; i < 2; ++i) {
    const double prefill_ms = 32 * 1000.0 / j["runs"]["prefill_tok_s"][i].get<double>();
    EXPECT_GE(j["runs"]["ttft_ms"][i].get<double>(), prefill_ms * (1 - 1e-9)) << "run " << i;
  }

  EXPECT_NE(r.err.find("warm-up"), std::string::npos) << "progress goes to stderr";
  EXPECT_NE(r.err.find("run 2/2"), std::string::npos) << r.err;
}

TEST(BenchCommand, ReportNamesEveryFigure) {
  const auto r = run_revis("bench -m " + shell_quote(kModel) + " -p 16 -n 4 -r 1 -t 2 --bandwidth-mib 256");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* label :
       {"prefill", "generation", "TTFT", "peak RSS", "bytes/token", "bandwidth", "roofline", "CPU share", "arithmetic"})
    EXPECT_NE(r.out.find(label), std::string::npos) << label << " missing from:\n" << r.out;
}

TEST(BenchCommand, FrontiersPrintOneCsvRowPerDepth) {
  const auto r = run_revis("bench -m " + shell_quote(kModel) + " -n 4 -r 2 -t 2 --frontiers 64,32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0], "depth,prefill_tok_s,gen_tok_s");
  const int expected_depths[] = {32, 64};  // ascending, whatever order they were given in
  for (int row = 0; row < 2; ++row) {
    int depth = 0;
    double prefill = 0, generation = 0;
    ASSERT_EQ(std::sscanf(lines[row + 1].c_str(), "%d,%lf,%lf", &depth, &prefill, &generation), 3) << lines[row + 1];
    EXPECT_EQ(depth, expected_depths[row]);
    EXPECT_GT(prefill, 0.0);
    EXPECT_GT(generation, 0.0);
  }
}

TEST(BenchCommand, DepthJsonGivesThatDepthsFigures) {
  const auto r = run_revis("bench -m " + shell_quote(kModel) + " -n 4 -r 2 -t 2 --depth 48 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["depth"], 48);
  EXPECT_GE(j["n_ctx"].get<int>(), 48 + 4) << "the context holds the depth and the generated tokens";
  ASSERT_EQ(j["depths"].size(), 1u);
  const nlohmann::json& row = j["depths"][0];
  EXPECT_EQ(row["depth"], 48);
  ASSERT_EQ(row["runs"]["gen_tok_s"].size(), 2u);
  for (const char* field : {"prefill_tok_s", "gen_tok_s"}) {
    EXPECT_GT(j[field].get<double>(), 0.0) << field;
    EXPECT_EQ(j[field], row[field]) << field;
    // The median of two runs lies between them.
    const double a = row["runs"][field][0], b = row["runs"][field][1];
    EXPECT_GE(j[field].get<double>(), std::min(a, b)) << field;
    EXPECT_LE(j[field].get<double>(), std::max(a, b)) << field;
  }
}

// --parallel: one row per stream count, ascending; every figure positive.
TEST(BenchCommand, ParallelGivesARowPerStreamCount) {
  const auto r =
      run_revis("bench -m " + shell_quote(kModel) + " -p 24 -n 6 -r 2 -t 2 --parallel 4,1 --batch-tokens 16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["batch_tokens"], 16);
  ASSERT_EQ(j["parallel"].size(), 2u) << r.out;
  EXPECT_EQ(j["parallel"][0]["streams"], 1);
  EXPECT_EQ(j["parallel"][1]["streams"], 4);
  for (const nlohmann::json& row : j["parallel"])
    for (const char* field : {"aggregate_tok_s", "stream_tok_s", "ttft_ms", "ttft_max_ms"})
      EXPECT_GT(row[field].get<double>(), 0.0) << field << " " << row.dump();
  const auto report = run_revis("bench -m " + shell_quote(kModel) + " -p 8 -n 4 -r 1 -t 2 --parallel 2");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("aggregate tok/s"), std::string::npos) << report.out;
}

TEST(BenchCommand, MlockFailureIsOnlyAWarning) {
  // Whether the lock succeeds depends on the locked-memory limit; either way
  // the benchmark runs, and a refusal is reported as a warning.
  const auto r = run_revis("bench -m " + shell_quote(kModel) + " -p 8 -n 2 -r 1 -t 2 --bandwidth-mib 64 --json --mlock");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["mlock"].is_boolean());
  if (!j["mlock"].get<bool>()) {
    EXPECT_NE(r.err.find("warning: --mlock"), std::string::npos) << r.err;
  }
}

TEST(BenchCommand, MmapFlagsChooseWhereTheWeightsLive) {
  for (const auto& [flag, expected] : {std::pair{" --mmap", "mapped"}, std::pair{" --no-mmap", "copied"}}) {
    const auto r = run_revis("bench -m " + shell_quote(kModel) + " -p 8 -n 2 -r 1 -t 2 --bandwidth-mib 64 --json" + flag);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["weights"], expected) << flag;
  }
  const auto both = run_revis("bench -m " + shell_quote(kModel) + " --mmap --no-mmap");
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
}

TEST(BenchCommand, KernelsPicksTheBackend) {
  const auto scalar = run_revis("bench -m " + shell_quote(kModel) + kSmallRun + " --json --kernels scalar");
  ASSERT_EQ(scalar.exit_code, 0) << scalar.err;
  const nlohmann::json j = nlohmann::json::parse(scalar.out);
  EXPECT_EQ(j["kernels"], "scalar");
  EXPECT_GT(j["gen_tok_s"].get<double>(), 0.0);
  // Without the flag: the best backend this CPU has, by name.
  const auto best = run_revis("bench -m " + shell_quote(kModel) + kSmallRun + " --json");
  ASSERT_EQ(best.exit_code, 0) << best.err;
  const std::string name = nlohmann::json::parse(best.out)["kernels"];
  EXPECT_TRUE(name == "avx512" || name == "avx2" || name == "neon" || name == "scalar") << name;
}

TEST(BenchCommand, BadArgumentsFailWithOneLineError) {
  for (const std::string& args : {std::string(" --frontiers 32,x"), std::string(" --depth 0"),
                                  std::string(" -p 32 -n 8 -c 16"), std::string(" -r 0"),
                                  std::string(" --kernels bogus"), std::string(" --parallel 2,0"),
                                  std::string(" --parallel 2 --batch-tokens 0")}) {
    const auto r = run_revis("bench -m " + shell_quote(kModel) + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
}

// --matmul: matrix products without a model. A small from-memory matrix
// keeps the tests light (it is then partly in cache: no speed is asserted).
const std::string kMatMulRun = " -r 2 -t 2 --bandwidth-mib 32 --json";

TEST(BenchMatMul, OneResultPerTypeAndBackendWithPositiveFigures) {
  const auto r = run_revis("bench --matmul q4_k,Q8_0,q4_k" + kMatMulRun);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["threads"], 2);
  EXPECT_EQ(j["r"], 2);
  EXPECT_GT(j["memory_matrix_bytes"].get<uint64_t>(), 0u);
  EXPECT_LE(j["memory_matrix_bytes"].get<uint64_t>(), uint64_t{32} << 20);
  EXPECT_GT(j["bandwidth_gb_s"]["median"].get<double>(), 0.0);

  // Types in the order given, each once, every backend under each.
  const nlohmann::json& results = j["results"];
  ASSERT_FALSE(results.empty());
  ASSERT_EQ(results.size() % 2, 0u) << results.dump();
  const size_t backends = results.size() / 2;
  for (size_t i = 0; i < results.size(); ++i) {
    const nlohmann::json& one = results[i];
    EXPECT_EQ(one["type"], i < backends ? "Q4_K" : "Q8_0") << one.dump();
    EXPECT_EQ(one["kernels"], results[i % backends]["kernels"]) << "the same backends, in the same order, per type";
    for (const char* key : {"decode_memory_gb_s", "decode_memory_pct_bandwidth", "decode_cache_gb_s", "prefill_gops"}) {
      const nlohmann::json& figure = one[key];
      EXPECT_GT(figure["min"].get<double>(), 0.0) << key;
      EXPECT_LE(figure["min"].get<double>(), figure["median"].get<double>()) << key;
      EXPECT_LE(figure["median"].get<double>(), figure["max"].get<double>()) << key;
    }
    // Each way of prefetching timed; the decode figure is each run's
    // fastest, so no mode's median or extremes exceed it.
    const nlohmann::json& by_prefetch = one["decode_memory_by_prefetch"];
    ASSERT_EQ(by_prefetch.size(), 3u) << one.dump();
    for (const char* mode : {"into_l2", "non_temporal", "none"}) {
      const nlohmann::json& figure = by_prefetch[mode];
      EXPECT_GT(figure["min"].get<double>(), 0.0) << mode;
      for (const char* stat : {"min", "median", "max"})
        EXPECT_LE(figure[stat].get<double>(), one["decode_memory_gb_s"][stat].get<double>()) << mode << " " << stat;
    }
  }
  if (backends > 1) {
    EXPECT_NE(results[0]["kernels"], results[1]["kernels"]);
  }
  EXPECT_NE(r.err.find("run 2/2"), std::string::npos) << "progress goes to stderr: " << r.err;
}

TEST(BenchMatMul, KernelsPicksTheOneBackendAndTheReportNamesEachColumn) {
  const auto r = run_revis("bench --matmul q6_k -r 1 -t 2 --bandwidth-mib 16 --kernels scalar");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* label : {"bandwidth", "decode, memory GB/s", "% bw", "decode, cache GB/s", "prefill",
                            "prefetch     Q6_K scalar, decode from memory GB/s: into_l2"})
    EXPECT_NE(r.out.find(label), std::string::npos) << label << " missing from:\n" << r.out;
  const std::vector<std::string> lines = lines_of(r.out);
  const auto rows = std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("Q6_K", 0) == 0; });
  EXPECT_EQ(rows, 1) << r.out;
  EXPECT_NE(r.out.find("scalar"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ratio"), std::string::npos) << "one backend: nothing to compare";
}

TEST(BenchMatMul, BadArgumentsFailWithOneLineError) {
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {Case{"--matmul q8_k", "not a weight type"}, Case{"--matmul q4_k,bogus", "'bogus'"},
                        Case{"--matmul q4_k,", "''"}, Case{"--matmul q4_k -r 0", "-r"},
                        Case{"--matmul q4_k --kernels bogus", "--kernels"}, Case{"-n 4", "-m MODEL is required"},
                        Case{"--matmul q4_k -m " + shell_quote(kModel), "excludes"},
                        Case{"--matmul q4_k -p 32", "excludes"}, Case{"--matmul q4_k --frontiers 64", "excludes"}}) {
    const auto r = run_revis("bench " + c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
}

}  // namespace
}  // namespace revis
