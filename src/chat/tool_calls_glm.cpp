// GLM: <tool_call>NAME\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n</tool_call>,
// repeated (GLM 4.5 and 4.6, Laguna).
#include "chat/tool_call_family.h"
#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"
#include "chat/tool_call_tagged.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using namespace toolcalls;
using nlohmann::ordered_json;

ParsedAnswer parse_glm(std::string_view text, const ordered_json& tools) {
  ParsedAnswer out;
  std::string content;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find(kToolCallOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t body = open + kToolCallOpen.size();
    const size_t close = text.find(kToolCallClose, body);
    if (close == std::string_view::npos) return as_content(text);
    const std::string_view inner = text.substr(body, close - body);
    const size_t first_key = inner.find(kArgKeyOpen);
    const std::string_view name = trim(inner.substr(0, first_key));
    if (name.empty() || name.find_first_of(" \t\n<>{") != std::string_view::npos) return as_content(text);
    ordered_json args = ordered_json::object();
    for (size_t k = first_key; k != std::string_view::npos; k = inner.find(kArgKeyOpen, k)) {
      const size_t key_end = inner.find(kArgKeyClose, k);
      const size_t value_open = inner.find(kArgValueOpen, k);
      const size_t value_end = inner.find(kArgValueClose, k);
      if (key_end == std::string_view::npos || value_open == std::string_view::npos ||
          value_end == std::string_view::npos || !(key_end < value_open && value_open < value_end))
        return as_content(text);
      const std::string key(trim(inner.substr(k + kArgKeyOpen.size(), key_end - k - kArgKeyOpen.size())));
      const size_t v = value_open + kArgValueOpen.size();
      args[key] = tagged_value(inner.substr(v, value_end - v), property_schema(tools, name, key));
      k = value_end + kArgValueClose.size();
    }
    content += text.substr(pos, open - pos);
    out.calls.push_back({"", std::string(name), json_text(args)});
    pos = close + kToolCallClose.size();
  }
  if (out.calls.empty()) return as_content(text);
  content += text.substr(pos);
  out.content = std::string(trim(content));
  return out;
}

}  // namespace

ToolCallFamily glm_tool_calls() {
  return {
      .format = ToolFormat::kGlm,
      .name = "glm",
      .written_by = [](std::string_view source) { return contains(source, kArgKeyOpen) && contains(source, kToolCallOpen); },
      .markers = {kToolCallOpen, kToolCallClose, kArgKeyOpen, kArgKeyClose, kArgValueOpen, kArgValueClose},
      .openers = {kToolCallOpen},
      .parse = parse_glm,
      .call_gbnf =
          [](const std::string& name, const std::string& arguments) {
            return gbnf_literal(std::string(kToolCallOpen) + name) + " " + arguments + " \"\\n\"? " +
                   gbnf_literal(kToolCallClose);
          },
      .argument_gbnf =
          [](const std::string& key, const std::string& value) {
            return "\"\\n\"? " + gbnf_literal(std::string(kArgKeyOpen) + key + std::string(kArgKeyClose)) +
                   " \"\\n\"? " + gbnf_literal(kArgValueOpen) + " " + value + " " + gbnf_literal(kArgValueClose);
          },
  };
}

}  // namespace revis::node
