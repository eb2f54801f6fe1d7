// The models directory: where `revis pull` puts files and where
// -m ORG/REPO:QUANT finds them. A repository's files keep their hub paths
// under DIR/ORG/REPO/, so one directory holds any number of repositories
// and quantizations side by side; downloads in progress end in ".part".
//
// DIR is REVIS_MODELS_DIR when set, else $XDG_CACHE_HOME/revis/models,
// else ~/.cache/revis/models (`revis pull --models-dir` overrides all).
//
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hub/file_choice.h"
#include "hub/reference.h"
#include "revis/status.h"

namespace revis::hub {

using Getenv = std::function<const char*(const char*)>;

Result<std::string> default_models_dir(const Getenv& getenv);

// DIR/ORG/REPO.
std::string repo_dir(const std::string& dir, const std::string& repo);

// The whole files (no ".part") under DIR/ORG/REPO, named relative to it.
std::vector<RepoFile> local_files(const std::string& dir, const std::string& repo);

struct LocalModel {
  std::string repo;
  ModelFiles model;
  uint64_t bytes = 0;  // all parts
};
// Every model under DIR, by repository then name.
std::vector<LocalModel> list_local_models(const std::string& dir);

// The path of the model `ref` names in DIR (its first part, for a split
// model), chosen as file_choice.h chooses; an error when it is not there.
Result<std::string> find_local_model(const std::string& dir, const ModelReference& ref);

// Deletes the files of the model `ref` names (with any ".part" beside
// them) and the directories left empty; returns the paths deleted.
Result<std::vector<std::string>> remove_local_model(const std::string& dir, const ModelReference& ref);

}  // namespace revis::hub
