// libFuzzer target for the OpenAI chat request parser and Anthropic's
// messages parser (the bytes of an HTTP body), and the tool-call readers (a
// model's output, which a client can steer). The first byte picks: even =
// a request body (byte % 4 == 0 a chat request, else an Anthropic one),
// whose refusal must carry a message and whose tools must give every
// family's call grammar or an error; odd = an answer in the family
// (byte >> 1) % 10, which must parse to the same calls whole and streamed in
// two pieces.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "api/anthropic_api.h"
#include "api/openai_api.h"
#include "chat/harmony.h"
#include "chat/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace revis::node;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const ToolFormat formats[] = {ToolFormat::kHermes, ToolFormat::kLlama3,      ToolFormat::kMistral,
                                ToolFormat::kDeepSeek, ToolFormat::kXmlFunction, ToolFormat::kGlm,
                                ToolFormat::kKimi, ToolFormat::kCommandR,    ToolFormat::kFunctionary, ToolFormat::kHarmony,
                                ToolFormat::kGeneric};
  if (data[0] % 2 == 0) {
    auto r = data[0] % 4 == 0 ? parse_chat_request(text) : [&]() -> Outcome<OpenAiRequest> {
      auto m = parse_messages_request(text);
      if (!m.ok()) return m.error();
      return std::move(m->chat);
    }();
    if (!r.ok()) {
      if (r.error().message.empty()) __builtin_trap();
      return 0;
    }
    if (r->chat_options.tools)
      for (ToolFormat f : formats) {
        ToolRequest required{ToolChoice::kRequired, "", true};
        auto g = tool_call_grammar(f, *r->chat_options.tools, required, "</think>");
        if (!g.ok() && g.status().message().empty()) __builtin_trap();
      }
    return 0;
  }
  const ToolFormat format = formats[(data[0] >> 1) % std::size(formats)];
  const ParsedAnswer whole = parse_tool_calls(format, text, "seed");
  ToolCallSplitter splitter(format);
  const size_t cut = text.size() / 2;
  std::string content = splitter.feed(text.substr(0, cut));
  content += splitter.feed(text.substr(cut));
  const ParsedAnswer streamed = splitter.finish("seed");
  if (streamed.calls.size() != whole.calls.size()) __builtin_trap();
  for (size_t i = 0; i < whole.calls.size(); ++i)
    if (streamed.calls[i].name != whole.calls[i].name || streamed.calls[i].arguments != whole.calls[i].arguments)
      __builtin_trap();
  // A generic answer's words stream as they are decoded: what went out and
  // what the end adds are the whole answer's content.
  if (format == ToolFormat::kGeneric && content + streamed.content != whole.content) __builtin_trap();
  if (format == ToolFormat::kHarmony) {
    // Harmony streams through its own splitter: the same thinking, content
    // and calls in two pieces as whole.
    auto read = [&](std::initializer_list<std::string_view> pieces) {
      HarmonySplitter harmony(true);
      ReasoningDelta all;
      std::vector<ToolCall> calls;
      for (std::string_view piece : pieces) {
        ReasoningDelta d = harmony.feed(piece);
        all.reasoning += d.reasoning;
        all.content += d.content;
      }
      ReasoningDelta d = harmony.finish("seed", calls);
      all.reasoning += d.reasoning;
      all.content += d.content;
      return std::make_pair(all, calls);
    };
    const auto [one, one_calls] = read({text});
    const auto [two, two_calls] = read({text.substr(0, cut), text.substr(cut)});
    if (one.reasoning != two.reasoning || one.content != two.content || one_calls.size() != two_calls.size())
      __builtin_trap();
  }
  return 0;
}
