#include "chat/tool_call_family.h"

namespace revis::node {

std::span<const ToolCallFamily> tool_call_families() {
  // The XML families and GLM also write <tool_call>: they go before Hermes.
  // Generic matches no template: it is last, for tool_call_family() alone.
  static const std::vector<ToolCallFamily> families = {
      harmony_tool_calls(), deepseek_tool_calls(),     mistral_tool_calls(), kimi_tool_calls(),
      command_r_tool_calls(), xml_function_tool_calls(), glm_tool_calls(),     hermes_tool_calls(),
      functionary_tool_calls(), llama3_tool_calls(),  generic_tool_calls(),
  };
  return families;
}

const ToolCallFamily& tool_call_family(ToolFormat format) {
  for (const ToolCallFamily& family : tool_call_families())
    if (family.format == format) return family;
  return tool_call_families().front();  // unreachable: every ToolFormat has an entry
}

}  // namespace revis::node
