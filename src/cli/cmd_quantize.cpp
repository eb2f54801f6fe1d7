// revis quantize IN OUT TYPE (or --recipe NAME): convert a model to another
// tensor type mix.
#include <chrono>
#include <optional>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress_line.h"
#include "tools/imatrix_file.h"
#include "tools/quantize.h"

namespace revis::cli {
namespace {

struct QuantizeArgs {
  std::string input, output, type, recipe, imatrix;
  std::vector<std::string> tensor_types;
  int threads = 0;
};

int quantize(const QuantizeArgs& args) {
  // TYPE and --recipe name the same thing; llama.cpp users write the first,
  // ds4's recipes the second.
  const std::string& name = args.recipe.empty() ? args.type : args.recipe;
  if (name.empty()) return usage_error("a type mix is required: TYPE or --recipe NAME (" + quant_mix_names() + ")");
  const std::optional<QuantMix> mix = parse_quant_mix(name);
  if (!mix) return fail("type '" + name + "' is not supported (expected " + quant_mix_names() + ")");
  if (args.threads < 0) return fail("-t: expected >= 0");
  std::optional<Imatrix> imatrix;
  if (!args.imatrix.empty()) {
    auto read = read_imatrix(args.imatrix);
    if (!read.ok()) return fail(read.status().message());
    imatrix = std::move(*read);
  }
  std::vector<TensorTypeOverride> overrides;
  for (const std::string& spec : args.tensor_types) {
    auto parsed = parse_tensor_type_override(spec);
    if (!parsed.ok()) return usage_error(parsed.status().message());
    overrides.push_back(std::move(*parsed));
  }
  ThreadPool pool(args.threads > 0 ? args.threads : ThreadPool::default_threads());
  const auto start = std::chrono::steady_clock::now();
  ProgressLine progress("quantizing");
  Status s = quantize_model(
      args.input, args.output, *mix, pool,
      [&progress](size_t done, size_t total, const std::string& name) { progress.update(done, total, name); },
      imatrix ? &*imatrix : nullptr, overrides);
  if (!s.ok()) return fail(s.message());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "wrote %s (%s) in %.1f s\n", args.output.c_str(), quant_mix_name(*mix), seconds);
  return 0;
}

}  // namespace

void register_quantize(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("quantize", "Convert a GGUF model to another tensor type mix: " + quant_mix_names());
  auto args = std::make_shared<QuantizeArgs>();
  cmd->add_option("input", args->input, "Source GGUF model")->required();
  cmd->add_option("output", args->output, "Destination GGUF file")->required();
  auto* type = cmd->add_option("type", args->type, "Target type mix (see docs/formats.md)");
  cmd->add_option("--recipe", args->recipe, "The type mix by name, instead of TYPE (e.g. moe-2bit, moe-3bit)")
      ->excludes(type);
  cmd->add_option("-t,--threads", args->threads, "Threads (default: physical cores)");
  cmd->add_option("--imatrix", args->imatrix,
                  "Importance matrix (llama.cpp's imatrix GGUF or .dat): weighs the errors of Q2_K, Q3_K, IQ4_XS and the IQ types; IQ2_XS and MOE-2BIT need one, MOE-3BIT uses one");
  cmd->add_option("--tensor-type", args->tensor_types,
                  "PATTERN=TYPE: matrices whose name the regex matches get TYPE (repeatable; the first match wins)");
  cmd->callback([args, &exit_code] { exit_code = quantize(*args); });
}

}  // namespace revis::cli
