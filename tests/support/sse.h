// Reading an OpenAI Server-Sent Events body in tests: the data payloads,
// and what a client assembles from them.
#pragma once

#include <string>
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
