// `revis pull` and the -m ORG/REPO:QUANT of every command: the hub's
// listing, the choice of files, their download into the models directory.
//
// Contract:
//  - pull_model lists GET {endpoint}/api/models/ORG/REPO?blobs=true, chooses
//    the model's files (file_choice.h), and downloads each one missing from
//    DIR/ORG/REPO/ from {endpoint}/ORG/REPO/resolve/main/FILE
//    (download.h: resumed, verified). It returns the first file's path.
//  - resolve_model_path: an existing path is returned as it is; text that
//    is no ORG/REPO[:TAG] (reference.h) too, for the loader to report; a
//    reference is looked up in the models directory and, when no model
//    there matches it, pulled, as llama.cpp's -hf and `ollama run` do;
//    offline (HF_HUB_OFFLINE=1, the hub library's switch) that is an error
//    saying to `revis pull` it.
//
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "hub/models_dir.h"
#include "hub/reference.h"
#include "revis/status.h"

namespace revis::hub {

struct HubOptions {
  std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT
  // {} on each field: designated initializers may leave any of them out.
  std::string token{};                              // HF_TOKEN
  std::string models_dir{};
  bool offline = false;  // HF_HUB_OFFLINE: resolve_model_path never pulls
  int timeout_ms = 30000;
};

// From HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE and the models directory variables.
Result<HubOptions> hub_options_from_environment(const Getenv& getenv);

struct PullEvents {
  std::function<void(const std::string& message)> note{};  // what was chosen, what is there already
  std::function<void(const std::string& file, uint64_t done, uint64_t total)> progress{};
};

Result<std::string> pull_model(const ModelReference& ref, const HubOptions& options, const PullEvents& events);

Result<std::string> resolve_model_path(const std::string& text, const HubOptions& options, const PullEvents& events);

}  // namespace revis::hub
