// How `revis` reports a command line it cannot use: the closest known name for a mistyped command or option ("did you mean"), and
// the llama.cpp flags it accepts and ignores so that pasted command lines
// still run.
//
// Thread-safety: plain functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace revis::cli {

// The candidate nearest to `typed` by edit distance, if it is close enough
// to be what the user meant.
std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& candidates);

// llama.cpp's -ngl N, a one-dash name CLI11 cannot declare, as --gpu-layers N.
void rename_gpu_layers_flag(std::vector<std::string>& args);

// The first problem CLI11 would report less helpfully, as an error message:
// an unknown subcommand or an unknown option of the chosen one, each with
// the nearest known name. nullopt when there is none. args excludes argv[0].
std::optional<std::string> find_unknown_name(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace revis::cli
