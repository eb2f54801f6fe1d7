// Pieces shared by the subcommands: loading an engine with a progress line,
// and printing errors the same way everywhere.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "revis/engine.h"
#include "revis/sampling.h"

namespace CLI {
class App;
class Option;
}

namespace revis::cli {

// Loads a model, reporting progress and timing on stderr. On failure prints
// "error: ..." and returns nullptr.
std::unique_ptr<Engine> load_engine(const EngineOptions& options, bool quiet = false);

// Exit codes, listed in `revis --help`.
constexpr int kExitRuntimeError = 1;  // the model, a file, the network failed
constexpr int kExitUsageError = 2;    // the command line itself is wrong

// Prints "error: <message>" to stderr and returns kExitRuntimeError.
int fail(const std::string& message);
// Prints "error: <message>" to stderr and returns kExitUsageError: for a
// flag's value that is out of range, or a missing argument.
int usage_error(const std::string& message);

// The sampling flags (--temp, --top-k, --top-p, ...) of the commands that
// generate; defined with `revis run`'s flags in cmd_run.cpp.
void add_sampling_options(CLI::App& cmd, SamplingParams& sampling);

// --mmap and --no-mmap (llama.cpp's names), which set `weights`
// (EngineOptions::weights; kAuto when neither is given). Returns the two
// options.
std::vector<CLI::Option*> add_weight_memory_options(CLI::App& cmd, WeightMemory& weights);
// --device cpu|vulkan[:N] and -ngl/--gpu-layers N (EngineOptions::device,
// gpu_layers). Returns the two options.
std::vector<CLI::Option*> add_device_options(CLI::App& cmd, std::string& device, int& gpu_layers);
// Where a loaded engine holds its weights, for progress lines and reports:
// "mapped", "read into memory" or "read into memory, 113 matrices in stripes".
std::string weights_place(const ModelInfo& info);

// The items of a comma-separated flag value ("512,2048"), empty ones kept so
// that the caller can reject them ("512,,2048", "512,").
std::vector<std::string> split_list(const std::string& text);

// The whole content of a file, or an error.
Result<std::string> read_file(const std::string& path);

}  // namespace revis::cli
