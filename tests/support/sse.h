// Reading an OpenAI Server-Sent Events body in tests: the data payloads,
// and what a client assembles from them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace revis::testing {

// "data: {json}\n\n" events, in order; a well-formed stream ends with "[DONE]".
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

// Named events ("event: name\ndata: {json}\n\n", as Anthropic's and the
// Responses API's streams are), in order: (name, parsed data).
inline std::vector<std::pair<std::string, nlohmann::json>> named_sse_events(const std::string& body) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  for (size_t start = 0, end; start < body.size(); start = end + 2) {
    end = body.find("\n\n", start);
    if (end == std::string::npos) end = body.size();
    const std::string block = body.substr(start, end - start);
    const size_t data = block.find("data: ");
    if (data == std::string::npos) continue;
    const std::string name = block.rfind("event: ", 0) == 0 ? block.substr(7, block.find('\n') - 7) : "";
    out.emplace_back(name, nlohmann::json::parse(block.substr(data + 6)));
  }
  return out;
}

// The answer a streaming client puts together (chat deltas or completion text).
struct StreamedAnswer {
  std::string id, text, finish_reason;
  nlohmann::json usage, error;  // null unless sent
  bool done = false;            // ended with [DONE]
};

inline StreamedAnswer streamed_answer(const std::string& body) {
  StreamedAnswer a;
  for (const std::string& data : sse_events(body)) {
    if (data == "[DONE]") {
      a.done = true;
      continue;
    }
    const nlohmann::json e = nlohmann::json::parse(data);
    if (e.contains("error")) a.error = e["error"];
    if (e.contains("id") && a.id.empty()) a.id = e["id"];
    if (e.contains("usage")) a.usage = e["usage"];
    if (!e.contains("choices") || e["choices"].empty()) continue;
    const nlohmann::json& choice = e["choices"][0];
    a.text += choice.contains("delta") ? choice["delta"].value("content", "") : choice.value("text", "");
    if (!choice["finish_reason"].is_null()) a.finish_reason = choice["finish_reason"];
  }
  return a;
}

}  // namespace revis::testing
