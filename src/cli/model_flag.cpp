#include "cli/model_flag.h"

#include <cstdlib>

#include <CLI/CLI.hpp>

#include "cli/download_progress.h"
#include "hub/pull.h"

namespace revis::cli {
namespace {

std::string resolve(const std::string& value) {
  auto path = resolve_model_reference(value);
  if (!path.ok()) throw ModelReferenceError(path.status().message());
  return *path;
}

}  // namespace

void install_model_references(CLI::App& app) {
  for (const char* name : {"--model", "--draft"}) {
    CLI::Option* option = app.get_option_no_throw(name);
    if (!option) continue;
    option->transform(resolve);
    option->description(option->get_description() + " (or ORG/REPO[:QUANT] from the Hugging Face hub, pulled when missing)");
  }
  // Nameless subcommands are option groups, whose options the lookup above found already.
  for (CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); }))
    install_model_references(*sub);
}

Result<std::string> resolve_model_reference(const std::string& value) {
  // The common case, a path, costs nothing more than before.
  if (!hub::parse_reference(value)) return value;
  auto options = hub::hub_options_from_environment(std::getenv);
  if (!options.ok()) return options.status();
  DownloadProgress progress;
  return hub::resolve_model_path(value, *options, pull_events_on_stderr(progress));
}

void rename_hub_flags(std::vector<std::string>& args) {
  for (std::string& a : args) {
    if (a == "--") return;
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (name == "-hf" || name == "-hfr" || name == "--hf-repo") a = "--model" + (eq == std::string::npos ? "" : a.substr(eq));
  }
}

}  // namespace revis::cli
