// A model named on the Hugging Face hub the way llama.cpp's -hf and Ollama
// name them: ORG/REPO, optionally followed by :QUANT (a quantization tag
// such as Q4_K_M) or :FILE (a file of the repository, FILE.gguf).
//
// Contract: parse_reference accepts only that shape (one slash, hub-legal
// names, no trailing .gguf without a colon), so that a local path such as
// "models/m.gguf" or "/srv/m.gguf" is never taken for a repository.
//
// Thread-safety: plain functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace revis::hub {

struct ModelReference {
  std::string repo;  // "ORG/REPO"
  std::string tag;   // quantization tag or file name; empty: the default choice
  std::string text() const { return tag.empty() ? repo : repo + ":" + tag; }
};

std::optional<ModelReference> parse_reference(std::string_view text);

}  // namespace revis::hub
