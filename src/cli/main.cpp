// revis: one binary, one subcommand per job.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/model_flag.h"
#include "cli/usage.h"
#include "node/build_info.h"

namespace {

constexpr const char* kFooter = R"(Exit status: 0 done, 1 the work failed (a model, a file, the network), 2 the command line is wrong.
llama.cpp's -ngl N means --gpu-layers N (with --device vulkan), and its -hf ORG/REPO[:QUANT] means -m. A repeated option takes its last value.
Models by name: revis pull ORG/REPO[:QUANT], then -m ORG/REPO[:QUANT] anywhere a model is taken (docs/models.md).
Environment of `revis serve`: REVIS_HOST, REVIS_PORT, REVIS_MODEL, REVIS_TOKEN (after --config's file, before the flags).)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"revis - local LLM inference: one machine, one inference"};
  app.name("revis");
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return revis::node::version_text(); });
  app.footer(kFooter);
  // llama.cpp and Ollama users repeat a flag to change it: the last wins.
  // Options of vector type (--stop, --peer) still collect every value.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  int exit_code = 0;
  revis::cli::register_run(app, exit_code);
  revis::cli::register_chat(app, exit_code);
  revis::cli::register_tokenize(app, exit_code);
  revis::cli::register_inspect(app, exit_code);
  revis::cli::register_quantize(app, exit_code);
  revis::cli::register_imatrix(app, exit_code);
  revis::cli::register_perplexity(app, exit_code);
  revis::cli::register_mkmodel(app, exit_code);
  revis::cli::register_demo(app, exit_code);
  revis::cli::register_serve(app, exit_code);
  revis::cli::register_submit(app, exit_code);
  revis::cli::register_bench(app, exit_code);
  revis::cli::register_kv(app, exit_code);
  revis::cli::register_batch(app, exit_code);
  revis::cli::register_status(app, exit_code);
  revis::cli::register_template(app, exit_code);
  revis::cli::register_devices(app, exit_code);
  revis::cli::register_models(app, exit_code);
  revis::cli::install_model_references(app);

  std::vector<std::string> args(argv + 1, argv + argc);
  revis::cli::rename_hub_flags(args);
  revis::cli::rename_gpu_layers_flag(args);
  if (auto problem = revis::cli::find_unknown_name(app, args)) return revis::cli::usage_error(*problem);
  // CLI11 takes the arguments last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    revis::cli::usage_error(e.what());
    std::fprintf(stderr, "Run with --help for more information.\n");
    return revis::cli::kExitUsageError;
  } catch (const revis::cli::ModelReferenceError& e) {
    return revis::cli::fail(e.what());
  }
  return exit_code;
}
