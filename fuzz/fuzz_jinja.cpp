// libFuzzer target for the Jinja chat-template engine (a GGUF file or
// --chat-template brings the template: untrusted text). Each input is a
// template rendered on a fixed conversation with tools; any input must either
// render or fail with a message, within small limits, and never crash, hang
// or grow without bound.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "jinja/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace revis::jinja;
  static const ChatTemplateInput input = [] {
    auto in = chat_input_from_json(nlohmann::ordered_json::parse(R"({
      "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Wetter in Zürich? 天気"},
        {"role": "assistant", "content": null, "reasoning_content": "look it up",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21.5}"},
        {"role": "assistant", "content": "21.5 °C"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather <now>",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                "required": ["city"]}}}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
      "kwargs": {"enable_thinking": false}, "now": "2024-07-26T09:30:00"})"));
    return *in;
  }();
  Limits limits;
  limits.max_steps = 200000;
  limits.max_string = 1 << 20;
  limits.max_items = 1 << 16;
  limits.max_milliseconds = 2000;
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto out = render_chat_template(source, input, limits);
  if (out.ok()) {
    if (out->size() > limits.max_string) __builtin_trap();
  } else if (out.status().message().empty() && source.find("raise_exception") == std::string_view::npos) {
    __builtin_trap();  // every failure says why (only raise_exception("") may be silent)
  }
  return 0;
}
