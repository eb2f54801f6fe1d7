// XML function: <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>,
// repeated (Qwen3.5 and Qwen3-Coder, Nemotron 3, StepFun; Seed-OSS wraps
// the same in <seed:tool_call>).
#include <algorithm>

#include "chat/tool_call_family.h"
#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"
#include "chat/tool_call_tagged.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using namespace toolcalls;
using nlohmann::ordered_json;

// Where the first of `openers` occurs in text (npos: none).
size_t first_of(std::string_view text, std::initializer_list<std::string_view> openers) {
  size_t first = std::string_view::npos;
  for (std::string_view o : openers) first = std::min(first, text.find(o));
  return first;
}

// One newline on each side of a tagged value is layout, not value.
std::string_view strip_one_newline(std::string_view v) {
  if (v.starts_with('\n')) v.remove_prefix(1);
  if (v.ends_with('\n')) v.remove_suffix(1);
  return v;
}

ParsedAnswer parse_xml_function(std::string_view text, const ordered_json& tools) {
  const size_t at = first_of(text, {kToolCallOpen, kSeedToolCallOpen});
  if (at == std::string_view::npos) return as_content(text);
  ParsedAnswer out;
  size_t pos = at;
  for (;;) {
    const size_t open = text.find(kFunctionOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t name_end = text.find('>', open);
    const size_t close = text.find(kFunctionClose, open);
    if (name_end == std::string_view::npos || close == std::string_view::npos || name_end > close) return as_content(text);
    const std::string_view name = trim(text.substr(open + kFunctionOpen.size(), name_end - open - kFunctionOpen.size()));
    if (name.empty()) return as_content(text);
    ordered_json args = ordered_json::object();
    const std::string_view body = text.substr(name_end + 1, close - name_end - 1);
    for (size_t p = body.find(kParameterOpen); p != std::string_view::npos; p = body.find(kParameterOpen, p)) {
      const size_t key_end = body.find('>', p);
      const size_t value_end = body.find(kParameterClose, p);
      if (key_end == std::string_view::npos || value_end == std::string_view::npos || key_end > value_end)
        return as_content(text);
      const std::string key(trim(body.substr(p + kParameterOpen.size(), key_end - p - kParameterOpen.size())));
      args[key] = tagged_value(strip_one_newline(body.substr(key_end + 1, value_end - key_end - 1)),
                               property_schema(tools, name, key));
      p = value_end + kParameterClose.size();
    }
    out.calls.push_back({"", std::string(name), json_text(args)});
    pos = close + kFunctionClose.size();
  }
  if (out.calls.empty()) return as_content(text);
  out.content = std::string(trim(text.substr(0, at)));
  return out;
}

}  // namespace

ToolCallFamily xml_function_tool_calls() {
  return {
      .format = ToolFormat::kXmlFunction,
      .name = "xml-function",
      .written_by = [](std::string_view source) {
        return contains(source, kParameterOpen) && (contains(source, kToolCallOpen) || contains(source, kSeedToolCallOpen));
      },
      .markers = {kToolCallOpen, kToolCallClose, kSeedToolCallOpen, kSeedToolCallClose},
      .openers = {kToolCallOpen, kSeedToolCallOpen},
      .parse = parse_xml_function,
      .call_gbnf =
          [](const std::string& name, const std::string& arguments) {
            return gbnf_literal(std::string(kToolCallOpen) + "\n" + std::string(kFunctionOpen) + name + ">") + " " +
                   arguments + " \"\\n\"? " + gbnf_literal(std::string(kFunctionClose) + "\n" + std::string(kToolCallClose));
          },
      .argument_gbnf =
          [](const std::string& key, const std::string& value) {
            return "\"\\n\"? " + gbnf_literal(std::string(kParameterOpen) + key + ">") + " " + value + " " +
                   gbnf_literal(kParameterClose);
          },
  };
}

}  // namespace revis::node
