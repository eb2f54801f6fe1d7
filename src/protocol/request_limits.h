// What preparing one request may cost, from the node's configuration
// (max_json_depth, max_grammar_elements): its JSON nests at most
// max_json_depth deep, and a grammar, JSON schema or tool list compiles to
// at most grammar.max_elements elements. Past either, the request parsers
// answer bad_request naming the limit, in time linear in the body. The
// node's config sets them and the parsers (api/) obey them.
//
// Thread-safety: a plain value.
#pragma once

#include "grammar/grammar.h"

namespace revis::node {

struct RequestLimits {
  int max_json_depth = 64;
  GrammarLimits grammar{};
};

}  // namespace revis::node
