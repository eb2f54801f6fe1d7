// Llama 3.x: {"name": ..., "parameters": {...}} as the whole answer, with
// <|python_tag|> before it or not.
#include "chat/tool_call_family.h"
#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using namespace toolcalls;

ParsedAnswer parse_llama3(std::string_view text, const nlohmann::ordered_json&) {
  std::string_view body = trim(text);
  if (body.substr(0, kPythonTag.size()) == kPythonTag) body = trim(body.substr(kPythonTag.size()));
  if (body.empty() || body.front() != '{') return as_content(text);
  auto j = parse_json(body);
  auto call = j ? call_from_object(*j) : std::nullopt;
  if (!call) return as_content(text);
  return {"", {std::move(*call)}};
}

}  // namespace

ToolCallFamily llama3_tool_calls() {
  return {
      .format = ToolFormat::kLlama3,
      .name = "llama3",
      .written_by = [](std::string_view source) {
        return contains(source, "<|start_header_id|>") && contains(source, "tools");
      },
      .markers = {kPythonTag},
      .hold = ToolCallFamily::Hold::kOpeningAnswer,
      .openers = {"{", kPythonTag},
      .parse = parse_llama3,
      .call_gbnf =
          [](const std::string& name, const std::string& arguments) {
            return gbnf_literal("{\"name\": \"" + name + "\", \"parameters\": ") + arguments + gbnf_literal("}");
          },
  };
}

}  // namespace revis::node
