#include "chat/tool_call_tagged.h"

#include <algorithm>

#include "chat/tool_call_json.h"

namespace revis::node::toolcalls {

using nlohmann::ordered_json;

bool is_text_property(const ordered_json& schema) {
  if (!schema.is_object()) return false;
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array() && !e->empty())
    return std::all_of(e->begin(), e->end(), [](const ordered_json& v) { return v.is_string(); });
  if (auto c = schema.find("const"); c != schema.end()) return c->is_string();
  return schema.value("type", ordered_json()) == "string";
}

const ordered_json* property_schema(const ordered_json& tools, std::string_view name, const std::string& key) {
  if (!tools.is_array()) return nullptr;
  for (const ordered_json& tool : tools) {
    const ordered_json* f = tool.is_object() && tool.contains("function") ? &tool["function"] : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string() || (*f)["name"] != name) continue;
    const auto params = f->find("parameters");
    if (params == f->end() || !params->is_object()) return nullptr;
    const auto props = params->find("properties");
    if (props == params->end() || !props->is_object() || !props->contains(key)) return nullptr;
    return &(*props)[key];
  }
  return nullptr;
}

ordered_json tagged_value(std::string_view text, const ordered_json* schema) {
  if (schema && is_text_property(*schema)) return std::string(text);
  if (auto j = parse_json(trim(text)); j && !j->is_string()) return *j;
  return std::string(text);
}

}  // namespace revis::node::toolcalls
