// Tool calls in a model's output: the families write a call to one of the
// request's tools in their own syntax, and the OpenAI API returns it as
// `tool_calls` (id, function name, arguments as a JSON string).
//   Hermes / Qwen   <tool_call>{"name": ..., "arguments": {...}}</tool_call>   (repeated)
//   Llama 3.x       {"name": ..., "parameters": {...}}   (the whole answer; <|python_tag|> before it)
//   Mistral         [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]   or [TOOL_CALLS]name[ARGS]{...}
//   DeepSeek V3/R1  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//                   ```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
// The format is chosen from the chat template's source. Text outside the
// calls stays the answer's content. Output that looks like a call but does
// not parse is left as content, never dropped.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace revis::node {

enum class ToolFormat { kHermes, kLlama3, kMistral, kDeepSeek };

struct ToolCall {
  std::string id;         // "call_" + index within the answer + a per-request tag
  std::string name;
  std::string arguments;  // a JSON object, as text
};

struct ParsedAnswer {
  std::string content;
  std::vector<ToolCall> calls;
};

const char* tool_format_name(ToolFormat format);
// The format a chat template renders assistant tool calls in, if any.
std::optional<ToolFormat> tool_format(std::string_view template_source);

// Splits a whole answer into content and calls; ids are id_prefix + "_" + index.
ParsedAnswer parse_tool_calls(ToolFormat format, std::string_view text, std::string_view id_prefix);

}  // namespace revis::node
