// Tool calls in a model's output: the families write a call to one of the
// request's tools in their own syntax, and the OpenAI API returns it as
// `tool_calls` (id, function name, arguments as a JSON string).
//   Hermes / Qwen   <tool_call>{"name": ..., "arguments": {...}}</tool_call>   (repeated)
//   Llama 3.x       {"name": ..., "parameters": {...}}   (the whole answer; <|python_tag|> before it)
//   Mistral         [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]   or [TOOL_CALLS]name[ARGS]{...}
//                   (Mistral Small 3.2: [TOOL_CALLS]name[CALL_ID]id[ARGS]{...})
//   DeepSeek V3/R1  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//                   ```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   XML function    <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
//                   (Qwen3.5, Qwen3-Coder, Nemotron 3, StepFun; Seed-OSS: <seed:tool_call>)
//   GLM             <tool_call>NAME\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n</tool_call>
//                   (GLM 4.5/4.6, Laguna)
//   Kimi K2         <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>
//                   {...}<|tool_call_end|><|tool_calls_section_end|>   (ids: functions.NAME:INDEX)
//   Command R       <|START_ACTION|>[{"tool_call_id": "0", "tool_name": ..., "parameters": {...}}]<|END_ACTION|>
//                   (Command R7B, Command A, Cohere 2)
//   functionary     <function=NAME>{...}</function>   (v3.1)
//   harmony         <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}
//                   (gpt-oss; its messages also carry the thinking: harmony.h)
//   generic         {"tool_calls": [{"name": ..., "arguments": {...}}, ...]}   or {"response": "text"}
//                   (the whole answer; for templates with no tool-call syntax: the prompt
//                   describes the tools and this shape, generic_tool_prompt.h)
// The XML families write strings as they are and other values as JSON: an
// argument the tool declares as a string (or one of some strings) is text,
// any other that parses as JSON other than a string is that value.
// Each family is one entry of a table (tool_call_family.h) with its parser
// in tool_calls_<family>.cpp.
// The format is chosen from the chat template's source; a template that
// writes none of these syntaxes gets the generic one. Text outside the
// calls stays the answer's content. Output that looks like a call but does
// not parse is left as content, never dropped.
//
// ToolCallSplitter does the same on a stream: content goes out as it comes
// until the first sign of a call (the family's marker, or for Llama 3 a `{`
// opening the answer); from there on the text is held and parsed at the end.
// A generic answer's `response` text streams as content as it is decoded.
// Harmony answers stream through HarmonySplitter (harmony.h), which also
// splits off the thinking; ToolCallSplitter holds a harmony answer whole.
//
// tool_call_grammar() is the other direction: the GBNF grammar whose
// sentences are exactly one well-formed call in the family's syntax to one
// of the given tools, its arguments valid against the tool's parameters
// schema (tool_choice "required" or a named function). In the generic
// format it is the whole answer's: one or more calls (one without
// parallel_tool_calls), or with tool_choice "auto" a `response` instead.
//
// Thread-safety: pure functions; a splitter is used by one thread.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "revis/status.h"

namespace revis::node {

// A call's arguments nest at most this deep in a model's answer: deeper
// ones are read as text, not as a call.
inline constexpr int kMaxToolCallDepth = 128;

enum class ToolFormat {
  kHermes, kLlama3, kMistral, kDeepSeek, kXmlFunction, kGlm, kKimi, kCommandR, kFunctionary, kHarmony, kGeneric
};

struct ToolCall {
  std::string id;         // tool_call_id()
  std::string name;
  std::string arguments;  // a JSON object, as text
};

struct ParsedAnswer {
  std::string content;
  std::vector<ToolCall> calls;
};

// What a request asks of its tools (OpenAI's tool_choice and
// parallel_tool_calls); the tools themselves go to the chat template
// (ChatOptions::tools), whose presence means the output is read for calls.
enum class ToolChoice { kAuto, kNone, kRequired, kNamed };
struct ToolRequest {
  ToolChoice choice = ToolChoice::kAuto;
  std::string name;      // kNamed: the function that must be called
  bool parallel = true;  // false: at most one call is returned
  // Whether generation is constrained to a call (tool_call_grammar).
  bool forced() const { return choice == ToolChoice::kRequired || choice == ToolChoice::kNamed; }
};

const char* tool_format_name(ToolFormat format);
// The format a chat template renders assistant tool calls in, if any (never
// kGeneric: that is the fallback for a template with none).
std::optional<ToolFormat> tool_format(std::string_view template_source);
// The marker texts of the format (often control tokens, which the
// generation must show for the calls to be read: GenerateOptions::shown_tokens).
std::vector<std::string_view> tool_markers(ToolFormat format);

// The id of the answer's call `index`: 9 letters and digits from `seed`
// (unique per request) and the index, after "call_" as OpenAI's ids but for
// Mistral, whose templates take exactly 9 characters back.
std::string tool_call_id(ToolFormat format, std::string_view seed, size_t index);

// Splits a whole answer into content and calls (ids: tool_call_id()).
// `tools`, the request's (OpenAI's array), tells the tagged families' text
// arguments from the others (see above).
ParsedAnswer parse_tool_calls(ToolFormat format, std::string_view text, std::string_view id_seed,
                              const nlohmann::ordered_json& tools = nlohmann::ordered_json());

class ToolCallSplitter {
 public:
  explicit ToolCallSplitter(ToolFormat format, nlohmann::ordered_json tools = nlohmann::ordered_json())
      : format_(format), tools_(std::move(tools)) {}

  // The content that is certain now: not a call, nor a possible start of one
  // (trailing white space is held too: it goes before a call); in a held
  // generic answer, its `response` text decoded so far.
  std::string feed(std::string_view text);
  // The calls in what was held, and the rest of the content (all of the held
  // text when it holds no call). The splitter is spent.
  ParsedAnswer finish(std::string_view id_seed);

 private:
  ToolFormat format_;
  nlohmann::ordered_json tools_;
  bool started_ = false;  // content other than white space went out
  bool holding_ = false;  // a call began: everything from there is held
  std::string pending_;
  size_t held_read_ = 0;  // ToolCallFamily::held_content's place in pending_
  size_t held_sent_ = 0;  // bytes of content it gave, already sent
};

// The grammar of one call, in `format`, to one of `tools` (OpenAI's
// array; only request.name for kNamed), its arguments valid against the
// tool's parameters; in the generic format the whole answer's (above).
// `preamble` comes first (e.g. the close tag of a
// thinking block the template left open). Function names must be
// [A-Za-z0-9_-] (the API checks). Fails naming the tool whose schema revis
// cannot enforce.
Result<std::shared_ptr<const Grammar>> tool_call_grammar(ToolFormat format, const nlohmann::ordered_json& tools,
                                                        const ToolRequest& request, std::string_view preamble = {});
// Whether tool_call_grammar() constrains the answer: a required or named
// call in any format, and every answer in the generic format (whose whole
// answer is one JSON object).
bool tool_call_grammar_applies(ToolFormat format, const ToolRequest& request);

}  // namespace revis::node
