// Mistral: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] or
// [TOOL_CALLS]NAME[ARGS]{...} (Mistral Small 3.2: NAME[CALL_ID]ID[ARGS]{...}).
#include "chat/tool_call_family.h"
#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using namespace toolcalls;
using nlohmann::ordered_json;

ParsedAnswer parse_mistral(std::string_view text, const ordered_json&) {
  const size_t at = text.find(kMistralCalls);
  if (at == std::string_view::npos) return as_content(text);
  ParsedAnswer out;
  std::string_view rest = trim(text.substr(at + kMistralCalls.size()));
  if (!rest.empty() && rest.front() == '[') {  // [{"name": ..., "arguments": ...}, ...]
    const size_t end = json_end(rest);
    if (end == std::string_view::npos) return as_content(text);
    auto j = parse_json(rest.substr(0, end));
    if (!j || !j->is_array()) return as_content(text);
    for (const ordered_json& item : *j) {
      auto call = call_from_object(item);
      if (!call) return as_content(text);
      out.calls.push_back(std::move(*call));
    }
    out.content = std::string(trim(std::string(text.substr(0, at)) + std::string(rest.substr(end))));
    return out;
  }
  // NAME[ARGS]{...}, repeated, each after its own [TOOL_CALLS] or not.
  while (!rest.empty()) {
    const size_t args = rest.find(kMistralArgs);
    if (args == std::string_view::npos) return as_content(text);
    std::string_view name = rest.substr(0, args);
    name = trim(name.substr(0, name.find(kMistralCallId)));  // Mistral Small 3.2 writes NAME[CALL_ID]ID[ARGS]
    std::string_view json_text = trim(rest.substr(args + kMistralArgs.size()));
    const size_t end = json_end(json_text);
    if (name.empty() || end == std::string_view::npos) return as_content(text);
    auto j = parse_json(json_text.substr(0, end));
    auto arguments = j ? arguments_text(*j) : std::nullopt;
    if (!arguments) return as_content(text);
    out.calls.push_back({"", std::string(name), *arguments});
    rest = trim(json_text.substr(end));
    if (rest.substr(0, kMistralCalls.size()) == kMistralCalls) rest = trim(rest.substr(kMistralCalls.size()));
  }
  out.content = std::string(trim(text.substr(0, at)));
  return out;
}

}  // namespace

ToolCallFamily mistral_tool_calls() {
  return {
      .format = ToolFormat::kMistral,
      .name = "mistral",
      .written_by = [](std::string_view source) { return contains(source, kMistralCalls); },
      .markers = {kMistralCalls, kMistralArgs, kMistralCallId},
      .openers = {kMistralCalls},
      .parse = parse_mistral,
      .ids = ToolCallFamily::Ids::kNineCharacters,
      .call_gbnf =
          [](const std::string& name, const std::string& arguments) {
            return gbnf_literal(std::string(kMistralCalls) + name) + " (" + gbnf_literal(kMistralCallId) +
                   " [a-zA-Z0-9]{9})? " + gbnf_literal(kMistralArgs) + arguments;
          },
  };
}

}  // namespace revis::node
