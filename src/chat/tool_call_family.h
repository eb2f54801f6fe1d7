// One tool-call family as one entry of a table: how its chat templates are
// recognised, the markers the generation must show, where a call starts in
// a stream, how an answer is parsed, how the ids of its calls look and the
// grammar of one call. tool_calls.cpp, tool_call_splitter.cpp and
// tool_call_grammar.cpp read the entries instead of switching over
// ToolFormat; each family's entry and parser live in tool_calls_<family>.cpp.
//
// Thread-safety: the table is built once (a function-local static) and is
// read-only after that.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"

namespace revis::node {

struct ToolCallFamily {
  // Where a stream starts holding text as a call (ToolCallSplitter::feed).
  enum class Hold {
    kFromOpener,     // from the first of `openers`
    kOpeningAnswer,  // when the answer opens with one of `openers` (Llama 3, generic: a call is the whole answer)
    kWhole,          // always: a call's header may begin anywhere before it (harmony)
  };
  // How the ids of parsed calls look.
  enum class Ids {
    kOpenAi,         // "call_" and 9 letters and digits (tool_call_id)
    kNineCharacters, // the 9 letters and digits alone: the templates take exactly 9 characters back (Mistral)
    kFunctionIndex,  // functions.NAME:INDEX, which the template writes back with the result (Kimi)
  };

  ToolFormat format;
  const char* name;
  // Whether a chat template's source renders assistant calls in this
  // family. The table is asked in order and the first family that matches
  // wins, so a family whose templates also match a later one goes first.
  bool (*written_by)(std::string_view template_source);
  // The marker texts (often control tokens the generation must show:
  // GenerateOptions::shown_tokens).
  std::vector<std::string_view> markers;
  Hold hold = Hold::kFromOpener;
  std::vector<std::string_view> openers = {};  // the texts a call (kFromOpener) or a held answer (kOpeningAnswer) begins with
  // The whole answer's content and calls, without ids. `tools` is the
  // request's array (the tagged families read their arguments' types there).
  ParsedAnswer (*parse)(std::string_view text, const nlohmann::ordered_json& tools);
  Ids ids = Ids::kOpenAi;
  // The GBNF of one call to the function `name` whose arguments are the
  // GBNF `arguments`: for a JSON family the rule of the parameters schema
  // with a space on each side, for a tagged family the sequence of
  // argument_gbnf pieces.
  std::string (*call_gbnf)(const std::string& name, const std::string& arguments);
  // Tagged families (each argument in tags of its own): the GBNF of the
  // argument `key` whose value is the GBNF `value`. Null for the families
  // that write the arguments as one JSON object.
  std::string (*argument_gbnf)(const std::string& key, const std::string& value) = nullptr;
  // Families whose whole answer is one JSON object (generic): the GBNF of
  // that answer, given the rule `one_call` (one call to one of the tools)
  // and, when the request lets the model answer in words (tool_choice
  // auto), the rule `text` of a JSON string. Null for the families whose
  // grammar is one call. A family with it constrains every answer
  // (tool_call_grammar_applies).
  std::string (*answer_gbnf)(const ToolRequest& request, const std::string& one_call,
                             const std::string& text) = nullptr;
  // Families whose held answer may carry plain text (generic's `response`):
  // the content that is certain in `held` (all the held text so far),
  // reading on from `*from`, which starts at 0 and is kept between calls.
  // What it returns over a stream is a prefix of the content parse() gives
  // for the whole answer.
  std::string (*held_content)(std::string_view held, size_t* from) = nullptr;
};

// The families in the order their templates are told apart (written_by).
std::span<const ToolCallFamily> tool_call_families();
// The entry of `format`.
const ToolCallFamily& tool_call_family(ToolFormat format);

// The entries, one per family, each defined in its tool_calls_<family>.cpp.
ToolCallFamily hermes_tool_calls();
ToolCallFamily llama3_tool_calls();
ToolCallFamily mistral_tool_calls();
ToolCallFamily deepseek_tool_calls();
ToolCallFamily xml_function_tool_calls();
ToolCallFamily glm_tool_calls();
ToolCallFamily kimi_tool_calls();
ToolCallFamily command_r_tool_calls();
ToolCallFamily functionary_tool_calls();
ToolCallFamily harmony_tool_calls();
ToolCallFamily generic_tool_calls();  // never written_by a template: the fallback (tool_calls.h)

}  // namespace revis::node
