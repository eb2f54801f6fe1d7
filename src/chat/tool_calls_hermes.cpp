// Hermes / Qwen: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, repeated.
#include "chat/tool_call_family.h"
#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using namespace toolcalls;

ParsedAnswer parse_hermes(std::string_view text, const nlohmann::ordered_json&) {
  ParsedAnswer out;
  std::string content;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find(kToolCallOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t body = open + kToolCallOpen.size();
    const size_t close = text.find(kToolCallClose, body);
    const std::string_view inner = text.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body);
    auto j = parse_json(trim(inner));
    auto call = j ? call_from_object(*j) : std::nullopt;
    if (!call) break;  // not a call after all: the rest is content
    content += text.substr(pos, open - pos);
    out.calls.push_back(std::move(*call));
    pos = close == std::string_view::npos ? text.size() : close + kToolCallClose.size();
  }
  content += text.substr(pos);
  out.content = std::string(trim(content));
  return out;
}

}  // namespace

ToolCallFamily hermes_tool_calls() {
  return {
      .format = ToolFormat::kHermes,
      .name = "hermes",
      .written_by = [](std::string_view source) { return contains(source, kToolCallOpen); },
      .markers = {kToolCallOpen, kToolCallClose},
      .openers = {kToolCallOpen},
      .parse = parse_hermes,
      .call_gbnf =
          [](const std::string& name, const std::string& arguments) {
            return gbnf_literal("<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": ") + arguments +
                   gbnf_literal("}\n</tool_call>");
          },
  };
}

}  // namespace revis::node
