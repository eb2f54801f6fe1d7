// -m ORG/REPO:QUANT for every command that takes a model, in one place:
// install_model_references() gives each option named --model or --draft,
// in every subcommand, a transform that turns a hub reference that is not
// an existing path into the file in the models directory, pulling it when
// it is not there yet (hub/pull.h: resolve_model_path). llama.cpp's -hf,
// -hfr and --hf-repo are accepted for --model (rename_hub_flags).
//
// A reference that cannot be resolved (no network, no such repository)
// throws ModelReferenceError out of CLI::App::parse: main() reports it as
// a runtime error (exit 1), not as a mistyped command line.
//
// Thread-safety: plain functions.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "revis/status.h"

namespace CLI {
class App;
}

namespace revis::cli {

struct ModelReferenceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void install_model_references(CLI::App& app);

// `value` as a model path: itself, or the file a hub reference names in the
// models directory (pulled when missing, with progress on stderr). For the
// models of `revis serve`'s config file, which come after the flags.
Result<std::string> resolve_model_reference(const std::string& value);

// "-hf X", "-hf=X", "-hfr X", "--hf-repo X" become "--model X".
void rename_hub_flags(std::vector<std::string>& args);

}  // namespace revis::cli
