// The speculative decoding flags of the commands that generate (run, chat,
// serve): --draft FILE|mtp, --lookup, --draft-max N, and the drafter they ask
// for (revis/draft.h).
#pragma once

#include <memory>
#include <string>

#include "revis/draft.h"

namespace CLI {
class App;
}

namespace revis::cli {

struct DraftFlags {
  std::string model;  // --draft: a draft model of the target's vocabulary, or kMtpDraft
  bool lookup = false;
  int max = kDefaultDraftMax;
};

void add_draft_options(CLI::App& cmd, DraftFlags& flags);

// The drafter the flags ask for, null when none, or an error (a draft
// model that does not load or does not share the target's vocabulary).
Result<std::unique_ptr<Drafter>> make_drafter(const Engine& target, const DraftFlags& flags);

}  // namespace revis::cli
