// functionary v3.1: <function=NAME>{...}</function>, repeated.
#include "chat/tool_call_family.h"
#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using namespace toolcalls;

ParsedAnswer parse_functionary(std::string_view text, const nlohmann::ordered_json&) {
  ParsedAnswer out;
  std::string content;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find(kFunctionOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t name_end = text.find('>', open);
    if (name_end == std::string_view::npos) return as_content(text);
    const std::string_view name = trim(text.substr(open + kFunctionOpen.size(), name_end - open - kFunctionOpen.size()));
    const std::string_view json = trim(text.substr(name_end + 1));
    const size_t end = json.empty() || json.front() != '{' ? std::string_view::npos : json_end(json);
    if (name.empty() || end == std::string_view::npos) return as_content(text);
    auto j = parse_json(json.substr(0, end));
    auto arguments = j ? arguments_text(*j) : std::nullopt;
    if (!arguments) return as_content(text);
    content += text.substr(pos, open - pos);
    out.calls.push_back({"", std::string(name), *arguments});
    std::string_view after = trim(json.substr(end));
    if (after.starts_with(kFunctionClose)) after.remove_prefix(kFunctionClose.size());
    pos = text.size() - after.size();
  }
  if (out.calls.empty()) return as_content(text);
  content += text.substr(pos);
  out.content = std::string(trim(content));
  return out;
}

}  // namespace

ToolCallFamily functionary_tool_calls() {
  return {
      .format = ToolFormat::kFunctionary,
      .name = "functionary",
      .written_by = [](std::string_view source) {
        return contains(source, kFunctionOpen) && contains(source, kFunctionClose);
      },
      .markers = {kFunctionOpen, kFunctionClose},
      .openers = {kFunctionOpen},
      .parse = parse_functionary,
      .call_gbnf =
          [](const std::string& name, const std::string& arguments) {
            return gbnf_literal(std::string(kFunctionOpen) + name + ">") + arguments + gbnf_literal(kFunctionClose);
          },
  };
}

}  // namespace revis::node
