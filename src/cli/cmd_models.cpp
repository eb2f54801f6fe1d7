// revis pull, revis ls, revis rm: models by name from the Hugging Face hub,
// kept in the models directory (src/hub/; docs/models.md).
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/download_progress.h"
#include "hub/pull.h"

namespace revis::cli {
namespace {

struct ModelsArgs {
  std::string reference;
  std::string models_dir;  // --models-dir; empty: the environment's
};

// The hub options, with --models-dir over the environment's directory.
Result<hub::HubOptions> options_for(const ModelsArgs& args) {
  auto options = hub::hub_options_from_environment(std::getenv);
  if (!options.ok()) return options;
  if (!args.models_dir.empty()) options->models_dir = args.models_dir;
  return options;
}

Result<hub::ModelReference> reference_of(const ModelsArgs& args) {
  const auto ref = hub::parse_reference(args.reference);
  if (!ref) return Status::error("\"" + args.reference + "\": expected ORG/REPO, ORG/REPO:QUANT or ORG/REPO:FILE.gguf");
  return *ref;
}

int pull(const ModelsArgs& args) {
  auto ref = reference_of(args);
  if (!ref.ok()) return usage_error(ref.status().message());
  auto options = options_for(args);
  if (!options.ok()) return fail(options.status().message());
  DownloadProgress progress;
  auto path = hub::pull_model(*ref, *options, pull_events_on_stderr(progress));
  if (!path.ok()) return fail(path.status().message());
  std::printf("%s\n", path->c_str());
  return 0;
}

int list(const ModelsArgs& args) {
  auto options = options_for(args);
  if (!options.ok()) return fail(options.status().message());
  const auto models = hub::list_local_models(options->models_dir);
  if (models.empty()) {
    std::fprintf(stderr, "no models in %s (revis pull ORG/REPO:QUANT adds one)\n", options->models_dir.c_str());
    return 0;
  }
  std::printf("%-60s %10s  %-8s %s\n", "NAME", "SIZE", "QUANT", "FILE");
  for (const hub::LocalModel& m : models) {
    const std::string name = m.repo + ":" + (m.model.quant.empty() ? m.model.parts.front().name : m.model.quant);
    std::string file = m.model.parts.front().name;
    if (m.model.parts.size() > 1) file += " (+" + std::to_string(m.model.parts.size() - 1) + " parts)";
    std::printf("%-60s %8.1f M  %-8s %s\n", name.c_str(), m.bytes / 1048576.0, m.model.quant.empty() ? "-" : m.model.quant.c_str(),
                file.c_str());
  }
  return 0;
}

int remove(const ModelsArgs& args) {
  auto ref = reference_of(args);
  if (!ref.ok()) return usage_error(ref.status().message());
  auto options = options_for(args);
  if (!options.ok()) return fail(options.status().message());
  auto removed = hub::remove_local_model(options->models_dir, *ref);
  if (!removed.ok()) return fail(removed.status().message());
  for (const std::string& path : *removed) std::printf("deleted %s\n", path.c_str());
  return 0;
}

CLI::App* add_command(CLI::App& app, int& exit_code, const char* name, const char* about, int (*run)(const ModelsArgs&),
                      const char* reference_help) {
  auto* cmd = app.add_subcommand(name, about);
  auto args = std::make_shared<ModelsArgs>();
  if (reference_help) cmd->add_option("model", args->reference, reference_help)->required();
  cmd->add_option("--models-dir", args->models_dir,
                  "Models directory (default: REVIS_MODELS_DIR, else $XDG_CACHE_HOME/revis/models, else ~/.cache/revis/models)");
  cmd->callback([args, run, &exit_code] { exit_code = run(*args); });
  return cmd;
}

}  // namespace

void register_models(CLI::App& app, int& exit_code) {
  add_command(app, exit_code, "pull", "Download a GGUF model from the Hugging Face hub (HF_ENDPOINT, HF_TOKEN; docs/models.md)", pull,
              "ORG/REPO[:QUANT|:FILE.gguf]; with no QUANT, Q4_K_M when the repository has it");
  add_command(app, exit_code, "ls", "List the models pulled into the models directory", list, nullptr);
  add_command(app, exit_code, "rm", "Delete a pulled model from the models directory", remove, "ORG/REPO[:QUANT|:FILE.gguf]");
}

}  // namespace revis::cli
