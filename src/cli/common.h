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

// How the generating commands (run, chat, perplexity, bench) load a model:
// the flags every one of them takes. -m and -t are added by each command,
// whose help texts and defaults differ; add_engine_flags adds the rest.
struct EngineFlags {
  std::string model;                            // -m
  int threads = 0;                              // -t
  WeightMemory weights = WeightMemory::kAuto;   // --mmap / --no-mmap (llama.cpp's names)
  std::string device;                           // --device cpu|vulkan[:N]
  int gpu_layers = -1;                          // -ngl / --gpu-layers
  // The engine these flags ask for, with a context of n_ctx tokens.
  EngineOptions options(int n_ctx) const;
};
// Adds --mmap, --no-mmap, --device and --gpu-layers, setting `flags`.
// Returns those options.
std::vector<CLI::Option*> add_engine_flags(CLI::App& cmd, EngineFlags& flags);
// Where a loaded engine holds its weights, for progress lines and reports:
// "mapped", "read into memory" or "read into memory, 113 matrices in stripes".
std::string weights_place(const ModelInfo& info);

// The items of a comma-separated flag value ("512,2048"), empty ones kept so
// that the caller can reject them ("512,,2048", "512,").
std::vector<std::string> split_list(const std::string& text);

// The whole content of a file, or an error.
Result<std::string> read_file(const std::string& path);

}  // namespace revis::cli
