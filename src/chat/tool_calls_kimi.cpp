// Kimi K2: <|tool_calls_section_begin|>(<|tool_call_begin|>functions.NAME:INDEX
// <|tool_call_argument_begin|>{...}<|tool_call_end|>)*<|tool_calls_section_end|>.
// A call's id is the model's functions.NAME:INDEX, which its template
// writes back with the result.
#include "chat/tool_call_family.h"
#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using namespace toolcalls;

ParsedAnswer parse_kimi(std::string_view text, const nlohmann::ordered_json&) {
  const size_t at = text.find(kKimiSectionBegin);
  if (at == std::string_view::npos) return as_content(text);
  ParsedAnswer out;
  size_t pos = at + kKimiSectionBegin.size();
  for (;;) {
    const size_t begin = text.find(kKimiCallBegin, pos);
    if (begin == std::string_view::npos) break;
    const size_t id_start = begin + kKimiCallBegin.size();
    const size_t args = text.find(kKimiArgsBegin, id_start);
    if (args == std::string_view::npos) return as_content(text);
    std::string_view name = trim(text.substr(id_start, args - id_start));
    if (name.starts_with("functions.")) name.remove_prefix(std::string_view("functions.").size());
    name = name.substr(0, name.rfind(':'));
    std::string_view json = trim(text.substr(args + kKimiArgsBegin.size()));
    const size_t end = json_end(json);
    if (name.empty() || end == std::string_view::npos) return as_content(text);
    auto j = parse_json(json.substr(0, end));
    auto arguments = j ? arguments_text(*j) : std::nullopt;
    if (!arguments) return as_content(text);
    out.calls.push_back({"", std::string(name), *arguments});
    const size_t call_end = text.find(kKimiCallEnd, args);
    pos = call_end == std::string_view::npos ? text.size() : call_end + kKimiCallEnd.size();
  }
  if (out.calls.empty()) return as_content(text);
  out.content = std::string(trim(text.substr(0, at)));
  return out;
}

}  // namespace

ToolCallFamily kimi_tool_calls() {
  return {
      .format = ToolFormat::kKimi,
      .name = "kimi",
      .written_by = [](std::string_view source) { return contains(source, kKimiSectionBegin); },
      .markers = {kKimiSectionBegin, kKimiCallBegin, kKimiArgsBegin, kKimiCallEnd, kKimiSectionEnd},
      .openers = {kKimiSectionBegin},
      .parse = parse_kimi,
      .ids = ToolCallFamily::Ids::kFunctionIndex,
      .call_gbnf =
          [](const std::string& name, const std::string& arguments) {
            return gbnf_literal(std::string(kKimiSectionBegin) + std::string(kKimiCallBegin) + "functions." + name +
                                ":0" + std::string(kKimiArgsBegin)) +
                   arguments + gbnf_literal(std::string(kKimiCallEnd) + std::string(kKimiSectionEnd));
          },
  };
}

}  // namespace revis::node
