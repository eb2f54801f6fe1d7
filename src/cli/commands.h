// The subcommands of the `revis` binary. Each register_* function adds one
// CLI11 subcommand whose callback does the work and stores the exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace revis::cli {

void register_inspect(CLI::App& app, int& exit_code);
void register_tokenize(CLI::App& app, int& exit_code);
void register_run(CLI::App& app, int& exit_code);
void register_chat(CLI::App& app, int& exit_code);
void register_quantize(CLI::App& app, int& exit_code);
void register_imatrix(CLI::App& app, int& exit_code);
void register_perplexity(CLI::App& app, int& exit_code);
void register_mkmodel(CLI::App& app, int& exit_code);
void register_demo(CLI::App& app, int& exit_code);
void register_serve(CLI::App& app, int& exit_code);
void register_submit(CLI::App& app, int& exit_code);
void register_bench(CLI::App& app, int& exit_code);
void register_kv(CLI::App& app, int& exit_code);
void register_batch(CLI::App& app, int& exit_code);
void register_status(CLI::App& app, int& exit_code);
void register_template(CLI::App& app, int& exit_code);
void register_devices(CLI::App& app, int& exit_code);
// pull, ls, rm (cmd_models.cpp).
void register_models(CLI::App& app, int& exit_code);

}  // namespace revis::cli
