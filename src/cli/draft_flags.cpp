#include "cli/draft_flags.h"

#include <CLI/CLI.hpp>

namespace revis::cli {

void add_draft_options(CLI::App& cmd, DraftFlags& flags) {
  auto* model = cmd.add_option("--draft,--model-draft", flags.model,
                               "Speculative decoding with this draft model (same vocabulary, e.g. fewer bits), "
                               "or 'mtp': the model's own multi-token-prediction head (DeepSeek nextn)");
  cmd.add_flag("--lookup", flags.lookup, "Speculative decoding with drafts looked up in the prompt and the output")
      ->excludes(model);
  cmd.add_option("--draft-max", flags.max, "Tokens per draft at most (with --draft or --lookup)")
      ->check(CLI::Range(1, kMaxDraft))
      ->capture_default_str();
}

Result<std::unique_ptr<Drafter>> make_drafter(const Engine& target, const DraftFlags& flags) {
  if (flags.lookup) return prompt_lookup_drafter();
  if (flags.model.empty()) return std::unique_ptr<Drafter>();
  return load_drafter(target, flags.model);
}

}  // namespace revis::cli
