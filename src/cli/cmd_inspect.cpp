// revis inspect FILE: the metadata and tensor table of a GGUF file; with
// --json, all of it (arrays in full) as one JSON object
// (tools/gguf_listing.h).
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "tools/gguf_listing.h"

namespace revis::cli {

void register_inspect(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("inspect", "Print the metadata and tensor table of a GGUF file");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("file", *path, "GGUF file")->required();
  cmd->add_flag("--json", *json, "Print one JSON object: metadata (arrays in full) and tensors");
  cmd->callback([path, json, &exit_code] {
    const Status printed = print_gguf_listing(*path, *json);
    exit_code = printed.ok() ? 0 : fail(printed.message());
  });
}

}  // namespace revis::cli
