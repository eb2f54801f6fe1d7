// Command R: <|START_ACTION|>[{"tool_call_id": "0", "tool_name": NAME, "parameters": {...}}, ...]<|END_ACTION|>
// (Command R7B, Command A and the Cohere 2 family).
#include "chat/tool_call_family.h"
#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using namespace toolcalls;
using nlohmann::ordered_json;

ParsedAnswer parse_command_r(std::string_view text, const ordered_json&) {
  const size_t at = text.find(kActionOpen);
  if (at == std::string_view::npos) return as_content(text);
  const std::string_view rest = trim(text.substr(at + kActionOpen.size()));
  const size_t end = rest.empty() || rest.front() != '[' ? std::string_view::npos : json_end(rest);
  if (end == std::string_view::npos) return as_content(text);
  auto j = parse_json(rest.substr(0, end));
  if (!j || !j->is_array()) return as_content(text);
  ParsedAnswer out;
  for (const ordered_json& item : *j) {
    if (!item.is_object() || !item.contains("tool_name") || !item["tool_name"].is_string()) return as_content(text);
    ordered_json call = {{"name", item["tool_name"]}};
    if (item.contains("parameters")) call["parameters"] = item["parameters"];
    auto parsed = call_from_object(call);
    if (!parsed) return as_content(text);
    out.calls.push_back(std::move(*parsed));
  }
  std::string_view after = rest.substr(end);
  if (after.starts_with(kActionClose)) after.remove_prefix(kActionClose.size());
  out.content = std::string(trim(std::string(text.substr(0, at)) + std::string(after)));
  return out;
}

}  // namespace

ToolCallFamily command_r_tool_calls() {
  return {
      .format = ToolFormat::kCommandR,
      .name = "command-r",
      .written_by = [](std::string_view source) { return contains(source, kActionOpen); },
      .markers = {kActionOpen, kActionClose},
      .openers = {kActionOpen},
      .parse = parse_command_r,
      .call_gbnf =
          [](const std::string& name, const std::string& arguments) {
            return gbnf_literal(std::string(kActionOpen) + "[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"" + name +
                                "\", \"parameters\": ") +
                   arguments + gbnf_literal("}\n]" + std::string(kActionClose));
          },
  };
}

}  // namespace revis::node
