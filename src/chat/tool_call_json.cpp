#include "chat/tool_call_json.h"

#include <utility>

#include "base/json_reader.h"
#include "chat/tool_call_markers.h"

namespace revis::node::toolcalls {

using nlohmann::ordered_json;

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) + 1 - b);
}

std::optional<ordered_json> parse_json(std::string_view text) {
  auto j = read_ordered_json(text, kMaxToolCallDepth);
  if (!j.ok()) return std::nullopt;
  return std::move(*j);
}

size_t json_end(std::string_view s) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::string json_text(const ordered_json& value) {
  return value.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::optional<std::string> arguments_text(const ordered_json& args) {
  if (args.is_object()) return json_text(args);
  if (args.is_string())
    if (auto inner = parse_json(args.get<std::string>()); inner && inner->is_object()) return json_text(*inner);
  return std::nullopt;
}

std::optional<ToolCall> call_from_object(const ordered_json& j) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  std::optional<std::string> text = args == j.end() ? std::optional<std::string>("{}") : arguments_text(*args);
  if (!text) return std::nullopt;
  return ToolCall{"", name->get<std::string>(), *text};
}

ParsedAnswer as_content(std::string_view text) { return {std::string(trim(text)), {}}; }

}  // namespace revis::node::toolcalls
