// libFuzzer target for the request parsers of the chat path (the bytes
// of an HTTP body): OpenAI's chat and Responses requests, Anthropic's
// messages and count_tokens, Ollama's chat, generate and embed; and the
// tool-call readers (a model's output, which a client can steer). The first
// byte picks: even = a request body, by byte % 8 (0 a chat request, 2 an
// Anthropic one, 4 a Responses one, continuing the one kept response when
// it names "resp_kept", 6 an Ollama one whose kind the next byte picks:
// % 4 = 0 /api/chat, 1 /api/generate, 2 /api/embed, 3 Anthropic's
// count_tokens), whose refusal must carry a message and whose tools must
// give every family's call grammar or an error; odd = an answer in the
// family (byte >> 1) % 11, which must parse to the same calls whole and
// streamed in two pieces.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "api/anthropic_api.h"
#include "api/ollama_api.h"
#include "api/openai_api.h"
#include "api/responses_api.h"
#include "chat/harmony.h"
#include "chat/tool_calls.h"

// A store holding one response, "resp_kept", for Responses requests to continue.
static revis::node::ResponseStore& kept_response() {
  static revis::node::ResponseStore* store = [] {
    auto* kept = new revis::node::ResponseStore();
    kept->keep("resp_kept", {nlohmann::json::parse(R"([{"role":"user","content":"hi"}])"),
                             nlohmann::json::parse(R"([{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}])"),
                             "{}"});
    return kept;
  }();
  return *store;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace revis::node;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const ToolFormat formats[] = {ToolFormat::kHermes, ToolFormat::kLlama3,      ToolFormat::kMistral,
                                ToolFormat::kDeepSeek, ToolFormat::kXmlFunction, ToolFormat::kGlm,
                                ToolFormat::kKimi, ToolFormat::kCommandR,    ToolFormat::kFunctionary, ToolFormat::kHarmony,
                                ToolFormat::kGeneric};
  if (data[0] % 2 == 0) {
    // The chat request a body becomes, or its refusal.
    auto chat_of = [](auto parsed) -> Outcome<OpenAiRequest> {
      if (!parsed.ok()) return parsed.error();
      return std::move(parsed->chat);
    };
    // Ollama's: the next byte picks the endpoint.
    auto ollama = [&]() -> Outcome<OpenAiRequest> {
      if (text.empty()) return NodeError{ErrorCode::kBadRequest, "empty"};
      const std::string_view body = text.substr(1);
      switch (static_cast<uint8_t>(text[0]) % 4) {
        case 0: return chat_of(parse_ollama_chat(body));
        case 1: return chat_of(parse_ollama_generate(body));
        case 2: {
          auto embed = parse_ollama_embed(body, text[0] & 4);
          if (!embed.ok()) return embed.error();
          return OpenAiRequest{};
        }
        default: return chat_of(parse_count_tokens_request(body));
      }
    };
    auto r = [&]() -> Outcome<OpenAiRequest> {
      switch (data[0] % 8) {
        case 2: return chat_of(parse_messages_request(text));
        case 6: return ollama();
        case 4: return chat_of(parse_responses_request(text, kept_response()));
        default: return parse_chat_request(text);  // 0
      }
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
