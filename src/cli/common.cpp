#include "cli/common.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

namespace revis::cli {

std::unique_ptr<Engine> load_engine(const EngineOptions& options, bool quiet) {
  if (!quiet) std::fprintf(stderr, "loading %s ...\n", options.model_path.c_str());
  const auto start = std::chrono::steady_clock::now();
  auto engine = Engine::load(options);
  if (!engine.ok()) {
    fail(engine.status().message());
    return nullptr;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const ModelInfo& info = (*engine)->info();
  if (!quiet)
    std::fprintf(stderr, "loaded %s (%s, %d layers, vocab %d, %.1f MiB, %s) in %.0f ms; context %d, %d threads\n",
                 info.name.c_str(), info.architecture.c_str(), info.n_layer, info.n_vocab,
                 info.file_bytes / 1048576.0, weights_place(info).c_str(), ms, info.n_ctx,
                 info.n_threads);
  if ((options.device.empty() || options.device == "cpu") && options.gpu_layers >= 0 && !quiet)
    std::fprintf(stderr, "note: -ngl %d does nothing on the CPU (--device vulkan puts layers on a GPU)\n",
                 options.gpu_layers);
  if (info.device != "cpu" && !quiet)
    std::fprintf(stderr, "GPU %s runs %d of %d layers%s (%.1f MiB of its memory)\n", info.device.c_str(),
                 info.gpu_layers, info.n_layer, info.gpu_output ? " and the output matrix" : "",
                 info.device_bytes / 1048576.0);
  for (const std::string& warning : info.device_warnings) std::fprintf(stderr, "warning: GPU: %s\n", warning.c_str());
  // Positions past the trained ones are unlike anything the model saw:
  // without RoPE scaling the text degrades there.
  if (info.n_ctx > info.n_ctx_train && info.rope_freq_scale == 1)
    std::fprintf(stderr, "warning: -c %d is above the %d tokens this model was trained on, and it has no RoPE "
                 "scaling: expect poor text past %d tokens\n", info.n_ctx, info.n_ctx_train, info.n_ctx_train);
  return std::move(*engine);
}

std::string weights_place(const ModelInfo& info) {
  if (!info.weights_copied) return "mapped";
  if (info.striped_matrices == 0) return "read into memory";
  return "read into memory, " + std::to_string(info.striped_matrices) + " matrices in stripes";
}

EngineOptions EngineFlags::options(int n_ctx) const {
  return {.model_path = model,
          .weights = weights,
          .n_ctx = n_ctx,
          .n_threads = threads,
          .device = device,
          .gpu_layers = gpu_layers};
}

std::vector<CLI::Option*> add_engine_flags(CLI::App& cmd, EngineFlags& flags) {
  WeightMemory& weights = flags.weights;
  auto* map = cmd.add_flag_callback("--mmap", [&weights] { weights = WeightMemory::kMap; },
                                    "Map the model file instead of reading it into memory (default: read it where "
                                    "it takes at most 60% of the available memory; mapped weights decode slower)");
  auto* copy = cmd.add_flag_callback("--no-mmap", [&weights] { weights = WeightMemory::kCopy; },
                                     "Read the model into memory even where it takes most of it");
  map->excludes(copy);
  auto* device = cmd.add_option("--device", flags.device,
                                "Where the layers run: cpu (default), vulkan or vulkan:N (revis devices lists them)");
  auto* layers = cmd.add_option("--gpu-layers,--n-gpu-layers", flags.gpu_layers,
                                "With a GPU: how many of the last layers it runs (99: all; default: as many as fit; llama.cpp's -ngl)");
  return {map, copy, device, layers};
}

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return kExitRuntimeError;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return kExitUsageError;
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

}  // namespace revis::cli
