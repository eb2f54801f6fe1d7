#include "chat/tool_calls.h"

#include "chat/tool_call_family.h"

namespace revis::node {

const char* tool_format_name(ToolFormat format) { return tool_call_family(format).name; }

std::optional<ToolFormat> tool_format(std::string_view source) {
  for (const ToolCallFamily& family : tool_call_families())
    if (family.written_by(source)) return family.format;
  return std::nullopt;
}

std::vector<std::string_view> tool_markers(ToolFormat format) { return tool_call_family(format).markers; }

std::string tool_call_id(ToolFormat format, std::string_view seed, size_t index) {
  // FNV-1a over the seed and the index, written in base 62.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
  for (unsigned char c : seed) mix(c);
  for (size_t i = index + 1; i > 0; i /= 256) mix(static_cast<unsigned char>(i));
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string id;
  for (int k = 0; k < 9; ++k, h /= 62) id += kDigits[h % 62];
  return tool_call_family(format).ids == ToolCallFamily::Ids::kNineCharacters ? id : "call_" + id;
}

ParsedAnswer parse_tool_calls(ToolFormat format, std::string_view text, std::string_view id_seed,
                              const nlohmann::ordered_json& tools) {
  const ToolCallFamily& family = tool_call_family(format);
  ParsedAnswer out = family.parse(text, tools);
  for (size_t i = 0; i < out.calls.size(); ++i)
    out.calls[i].id = family.ids == ToolCallFamily::Ids::kFunctionIndex
                          ? "functions." + out.calls[i].name + ":" + std::to_string(i)
                          : tool_call_id(format, id_seed, i);
  return out;
}

}  // namespace revis::node
