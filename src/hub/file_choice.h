// Which files of a repository make the model a tag names. GGUF files only;
// the parts of a split GGUF ("M-Q8_0-00001-of-00003.gguf") count as one
// model. A tag matches a model when its components (split at '-', '.' and
// '/') appear, in order and next to each other, among the components of the
// model's name, ignoring case: "q4_k_m" matches "Model-Q4_K_M.gguf" and
// "sub/Model.Q4_K_M.gguf" but not "Model-Q4_K_M_L.gguf"; "UD-Q4_K_XL"
// matches "M-UD-Q4_K_XL.gguf". A tag ending in .gguf names a file (a split
// model by any of its parts).
//
// Contract: choose_model returns exactly one model or an error that names
// the repository and lists the models it has: no match, several matches,
// or a split model missing parts. With no tag: Q4_K_M when the repository
// has it (as Ollama and llama.cpp choose), else its only model; a repository
// of several models and no Q4_K_M asks for a tag. Projector files
// ("mmproj-*") are never a default choice.
//
// Thread-safety: plain functions.
#pragma once

#include <string>
#include <vector>

#include "hub/listing.h"
#include "revis/status.h"

namespace revis::hub {

struct ModelFiles {
  std::string label;            // the name less ".gguf" and any split suffix ("sub/Model-Q4_K_M")
  std::string quant;            // "Q4_K_M", "F16", ... from the name; empty when it names none
  std::vector<RepoFile> parts;  // one file, or the split parts in order
};

// The GGUF models among `files`, in name order.
std::vector<ModelFiles> group_models(const std::vector<RepoFile>& files);

// The models `tag` matches (with an empty tag: every model but projectors).
std::vector<ModelFiles> match_models(const std::vector<ModelFiles>& models, const std::string& tag);

// `what` names the file set in errors ("ORG/REPO on the hub", "ORG/REPO in DIR").
Result<ModelFiles> choose_model(const std::vector<RepoFile>& files, const std::string& what, const std::string& tag);

// "Q4_K_M (Model-Q4_K_M.gguf), Q8_0 (2 parts: Model-Q8_0-0000*-of-00002.gguf)".
std::string describe_models(const std::vector<ModelFiles>& models);

}  // namespace revis::hub
