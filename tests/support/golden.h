// The llama.cpp golden cases in ../shared/testdata/golden (and in the
// folders of the sets kept apart, such as deepseek2/ and moe2bit/, and of
// the sets this repository made itself under tests/testdata, such as
// gemma3/, gemma4/, gemma4moe/, gemma4moe-fused/, gemma4wide/, gpt-oss/, qwen35/, qwen35moe/ and qwen3next/; a case's name
// starts with its folder: "moe2bit/qwen3moe-MOE2.en")
// and the tolerance rules of the shared README, shared by the engine test
// and the CLI test.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/testdata.h"

namespace revis::testing {

struct GoldenCase {
  std::string name;        // "qwen3-Q4_K_M.en"
  std::string model_file;  // path to the GGUF
  std::string type;        // "Q4_K_M"
  bool moe = false;
  std::string prompt;
  std::vector<int32_t> prompt_tokens, greedy;
  int n_vocab = 0, n_rows = 0;
  std::vector<float> logits;  // n_rows x n_vocab

  bool is_float_type() const { return type == "F16" || type == "BF16" || type == "F32"; }
  const float* row(int k) const { return logits.data() + static_cast<size_t>(k) * n_vocab; }
};

// A folder holding golden/ and models/: the main set, those kept apart
// (mixtures of experts only), and those made in this repository
// (tests/testdata, dense).
struct GoldenSet {
  std::string folder;
  bool in_repo = false;
  bool moe = false;
};
inline const std::vector<GoldenSet>& golden_sets() {
  static const std::vector<GoldenSet> sets = {
      {"", false, false}, {"deepseek2/", false, true}, {"moe2bit/", false, true}, {"gemma3/", true, false},
      {"gemma4/", true, false}, {"gemma4moe/", true, true}, {"gemma4moe-fused/", true, true}, {"gemma4wide/", true, false},
      {"gpt-oss/", true, true}, {"qwen35/", true, false},
      {"qwen35moe/", true, true},
      {"qwen3next/", true, true}};
  return sets;
}

// A set by folder. A shared folder with tolerances of its own (deepseek4/,
// whose test enumerates it) is not among golden_sets(): it is read from the
// shared data as a mixture of experts.
inline GoldenSet golden_set(const std::string& folder) {
  for (const GoldenSet& set : golden_sets())
    if (set.folder == folder) return set;
  return {folder, false, true};
}

// A file of a set.
inline std::filesystem::path golden_path(const GoldenSet& set, const std::string& relative) {
  if (set.in_repo) return std::filesystem::path(REVIS_REPO_TESTDATA_DIR) / (set.folder + relative);
  return testdata(set.folder + relative);
}

inline std::vector<std::string> golden_case_names() {
  std::vector<std::string> names;
  for (const GoldenSet& gs : golden_sets())
    for (const auto& entry : std::filesystem::directory_iterator(golden_path(gs, "golden"))) {
      const std::string& set = gs.folder;
      const std::string file = entry.path().filename().string();
      if (file.size() > 5 && file.ends_with(".json") && file != "prompts.json")
        names.push_back(set + file.substr(0, file.size() - 5));
    }
  std::sort(names.begin(), names.end());
  return names;
}

inline GoldenCase load_golden(const std::string& name) {
  GoldenCase c;
  c.name = name;
  const size_t slash = name.rfind('/');
  const std::string set = slash == std::string::npos ? "" : name.substr(0, slash + 1);
  const std::string base = name.substr(set.size());
  const GoldenSet& gs = golden_set(set);
  std::ifstream in(golden_path(gs, "golden/" + base + ".json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  const std::string model = j["model"];
  c.model_file = golden_path(gs, "models/" + std::filesystem::path(model).filename().string()).string();
  const std::string stem = base.substr(0, base.find('.'));
  c.type = stem.substr(stem.rfind('-') + 1);  // "llama-bpe-Q4_K_M" -> "Q4_K_M"
  c.moe = gs.moe || stem.find("moe") != std::string::npos;
  c.prompt = j["prompt"];
  c.prompt_tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
  c.greedy = j["greedy"].get<std::vector<int32_t>>();
  c.n_vocab = j["n_vocab"];
  c.n_rows = j["n_rows"];
  c.logits = read_f32(golden_path(gs, "golden/" + j["logits_file"].get<std::string>()));
  return c;
}

inline double rms(const float* row, int n) {
  double sum = 0;
  for (int j = 0; j < n; ++j) sum += static_cast<double>(row[j]) * row[j];
  return std::sqrt(sum / n);
}

// max_j |ours - gold| / rms(gold)
inline double logit_error(const float* ours, const float* gold, int n) {
  double worst = 0;
  for (int j = 0; j < n; ++j) worst = std::max(worst, static_cast<double>(std::fabs(ours[j] - gold[j])));
  return worst / rms(gold, n);
}

inline int argmax(const float* row, int n) { return static_cast<int>(std::max_element(row, row + n) - row); }

// Golden's best logit beats the runner-up by more than 0.2 * rms.
inline bool is_clear(const float* gold, int n) {
  std::vector<float> sorted(gold, gold + n);
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
  return sorted[0] - sorted[1] > 0.2 * rms(gold, n);
}

}  // namespace revis::testing
