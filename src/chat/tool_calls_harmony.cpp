// harmony (gpt-oss): <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}.
// HarmonySplitter (harmony.h) reads the messages; this is its table entry.
#include "chat/harmony.h"
#include "chat/tool_call_family.h"
#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using namespace toolcalls;

// The answer's thinking is dropped: only its content and calls are asked for.
ParsedAnswer parse_harmony(std::string_view text, const nlohmann::ordered_json&) {
  HarmonySplitter harmony(true);
  ParsedAnswer out;
  std::string content = harmony.feed(text).content;
  content += harmony.finish("", out.calls).content;
  out.content = std::string(trim(content));
  return out;
}

}  // namespace

ToolCallFamily harmony_tool_calls() {
  return {
      .format = ToolFormat::kHarmony,
      .name = "harmony",
      .written_by = [](std::string_view source) {
        return contains(source, "<|channel|>") && contains(source, "<|message|>");
      },
      .markers = harmony_markers(),
      .hold = ToolCallFamily::Hold::kWhole,
      .parse = parse_harmony,
      .call_gbnf =
          [](const std::string& name, const std::string& arguments) {
            // Straight to the call, without an analysis message first.
            return "\" \"? " + gbnf_literal("to=functions." + name + "<|channel|>commentary json<|message|>") + arguments;
          },
  };
}

}  // namespace revis::node
