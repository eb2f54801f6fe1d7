// DeepSeek V3/R1: <｜tool▁calls▁begin｜>(<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
// ```json\n{...}\n```<｜tool▁call▁end｜>)*<｜tool▁calls▁end｜>
#include "chat/tool_call_family.h"
#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using namespace toolcalls;

ParsedAnswer parse_deepseek(std::string_view text, const nlohmann::ordered_json&) {
  const size_t at = text.find(kDsCallsBegin);
  if (at == std::string_view::npos) return as_content(text);
  ParsedAnswer out;
  size_t pos = at + kDsCallsBegin.size();
  for (;;) {
    const size_t begin = text.find(kDsCallBegin, pos);
    if (begin == std::string_view::npos) break;
    const size_t sep = text.find(kDsSep, begin);
    if (sep == std::string_view::npos) return as_content(text);
    const size_t name_start = sep + kDsSep.size();
    const size_t newline = text.find('\n', name_start);
    if (newline == std::string_view::npos) return as_content(text);
    const std::string_view name = trim(text.substr(name_start, newline - name_start));
    const size_t brace = text.find_first_of("{", newline);
    if (name.empty() || brace == std::string_view::npos) return as_content(text);
    const size_t end = json_end(text.substr(brace));
    if (end == std::string_view::npos) return as_content(text);
    auto j = parse_json(text.substr(brace, end));
    auto arguments = j ? arguments_text(*j) : std::nullopt;
    if (!arguments) return as_content(text);
    out.calls.push_back({"", std::string(name), *arguments});
    const size_t call_end = text.find(kDsCallEnd, brace + end);
    pos = call_end == std::string_view::npos ? text.size() : call_end + kDsCallEnd.size();
  }
  if (out.calls.empty()) return as_content(text);
  out.content = std::string(trim(text.substr(0, at)));
  return out;
}

}  // namespace

ToolCallFamily deepseek_tool_calls() {
  return {
      .format = ToolFormat::kDeepSeek,
      .name = "deepseek",
      .written_by = [](std::string_view source) { return contains(source, "tool▁call▁begin"); },
      .markers = {kDsCallsBegin, kDsCallBegin, kDsSep, kDsCallEnd, kDsCallsEnd},
      .openers = {kDsCallsBegin},
      .parse = parse_deepseek,
      .call_gbnf =
          [](const std::string& name, const std::string& arguments) {
            return gbnf_literal(std::string(kDsCallsBegin) + std::string(kDsCallBegin) + "function" +
                                std::string(kDsSep) + name + "\n```json\n") +
                   arguments + gbnf_literal("\n```" + std::string(kDsCallEnd) + std::string(kDsCallsEnd));
          },
  };
}

}  // namespace revis::node
