// revis: one binary, one subcommand per job.
#include <cstdio>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"revis - local LLM inference: one machine, one inference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "revis 0.1.0");
  int exit_code = 0;
  revis::cli::register_run(app, exit_code);
  revis::cli::register_chat(app, exit_code);
  revis::cli::register_tokenize(app, exit_code);
  revis::cli::register_inspect(app, exit_code);
  revis::cli::register_quantize(app, exit_code);
  revis::cli::register_mkmodel(app, exit_code);
  revis::cli::register_demo(app, exit_code);
  revis::cli::register_serve(app, exit_code);
  revis::cli::register_submit(app, exit_code);
  revis::cli::register_bench(app, exit_code);
  revis::cli::register_kv(app, exit_code);
  revis::cli::register_batch(app, exit_code);
  revis::cli::register_status(app, exit_code);
  revis::cli::register_template(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
