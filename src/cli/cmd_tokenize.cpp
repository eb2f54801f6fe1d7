// revis tokenize -m MODEL -p TEXT: the token ids of a text, space separated;
// with --json, {"ids": [...], "pieces": [...]}.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "tools/vocabulary_file.h"

namespace revis::cli {
namespace {

struct TokenizeArgs {
  std::string model, prompt, prompt_file;
  bool no_bos = false, special = false, pieces = false, json = false;
};

int tokenize(const TokenizeArgs& args) {
  std::string text = args.prompt;
  if (!args.prompt_file.empty()) {
    auto content = read_file(args.prompt_file);
    if (!content.ok()) return fail(content.status().message());
    text = *content;
  }
  // Only the vocabulary is needed, so vocabulary-only GGUF files work too.
  auto tokens = tokenize_with_vocabulary_of(args.model, text, !args.no_bos, args.special);
  if (!tokens.ok()) return fail(tokens.status().message());
  const std::vector<int32_t>& ids = tokens->ids;
  if (args.json) {
    // A piece may be part of a UTF-8 character: replaced, not an error.
    const nlohmann::json j = {{"ids", ids}, {"pieces", tokens->pieces}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    std::printf(i ? " %d" : "%d", ids[i]);
    if (args.pieces) std::printf(":'%s'", tokens->pieces[i].c_str());
  }
  std::printf("\n");
  return 0;
}

}  // namespace

void register_tokenize(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
  auto args = std::make_shared<TokenizeArgs>();
  cmd->add_option("-m,--model", args->model, "GGUF model or vocabulary file")->required();
  auto* p = cmd->add_option("-p,--prompt", args->prompt, "Text to tokenize");
  cmd->add_option("-f,--file", args->prompt_file, "Read the text from a file")->excludes(p);
  cmd->add_flag("--no-bos", args->no_bos, "Do not add the BOS token even if the model asks for it");
  cmd->add_flag("--special", args->special, "Parse special tokens (e.g. <|im_start|>) in the text");
  cmd->add_flag("--pieces", args->pieces, "Show each token's text next to its id");
  cmd->add_flag("--json", args->json, "Print {\"ids\": [...], \"pieces\": [...]} instead");
  cmd->callback([args, &exit_code] { exit_code = tokenize(*args); });
}

}  // namespace revis::cli
