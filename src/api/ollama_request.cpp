// The requests' half of ollama_api.h: Ollama's bodies rewritten as OpenAI
// ones (ollama_answer.cpp writes the answers).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "api/ollama_api.h"
#include "base/json_reader.h"

namespace revis::node {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

NodeError bad(std::string message) { return NodeError{ErrorCode::kBadRequest, std::move(message)}; }

bool present(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

// `images`: refused unless empty, as revis serves text models.
std::optional<NodeError> refuse_images(const json& j, const std::string& at) {
  auto it = j.find("images");
  if (it == j.end() || it->is_null() || (it->is_array() && it->empty())) return std::nullopt;
  return bad(at + "images is not supported (revis serves text models)");
}

// keep_alive: how long Ollama keeps the model loaded, a number of seconds
// or a duration string. revis keeps models while they fit its memory
// budget, so any value is accepted and changes nothing.
std::optional<NodeError> check_keep_alive(const json& j) {
  auto it = j.find("keep_alive");
  if (it == j.end() || it->is_null() || it->is_number() || it->is_string()) return std::nullopt;
  return bad("keep_alive must be a number of seconds or a duration string such as \"5m\"");
}

// Options that change the answer and that revis's sampler does not do:
// refused unless they hold the value that turns them off.
struct Unsupported {
  const char* name;
  int off;
};
constexpr Unsupported kUnsupportedOptions[] = {{"mirostat", 0}, {"typical_p", 1}, {"tfs_z", 1}};

// options: Ollama's sampling and length settings as the chat request's
// fields. Machine settings (num_gpu, num_thread, num_batch, use_mmap, ...)
// and names Ollama does not define are ignored, as Ollama ignores them.
std::optional<NodeError> copy_options(const json& j, ordered& chat, OllamaRequest& out) {
  auto it = j.find("options");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return bad("options must be an object");
  const json& o = *it;
  for (const char* key : {"temperature", "top_p", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty"}) {
    if (!present(o, key)) continue;
    if (!o[key].is_number()) return bad(std::string("options.") + key + " must be a number");
    chat[key] = o[key];
  }
  for (const char* key : {"top_k", "seed", "repeat_last_n"}) {
    if (!present(o, key)) continue;
    if (!o[key].is_number_integer()) return bad(std::string("options.") + key + " must be an integer");
    // Ollama's seed -1 (its default) asks for a random one, as no seed does.
    if (std::string_view(key) == "seed" && o[key].get<int64_t>() < 0) continue;
    chat[key] = o[key];
  }
  if (present(o, "num_predict")) {
    const json& n = o["num_predict"];
    if (!n.is_number_integer() || (n.get<int64_t>() < 1 && n.get<int64_t>() != -1 && n.get<int64_t>() != -2))
      return bad("options.num_predict must be a positive integer, -1 (no limit) or -2 (until the context is full)");
    if (n.get<int64_t>() > 0) chat["max_tokens"] = n;
  }
  if (present(o, "stop")) {
    const json& stop = o["stop"];
    if (!stop.is_string() && !stop.is_array()) return bad("options.stop must be a string or an array of strings");
    chat["stop"] = stop;
  }
  if (present(o, "num_ctx")) {
    if (!o["num_ctx"].is_number_integer() || o["num_ctx"].get<int64_t>() < 1)
      return bad("options.num_ctx must be a positive integer");
    out.num_ctx = o["num_ctx"].get<int64_t>();
  }
  for (const Unsupported& u : kUnsupportedOptions)
    if (present(o, u.name) && !(o[u.name].is_number() && o[u.name].get<double>() == u.off))
      return bad(std::string("options.") + u.name + " is not supported (revis samples with temperature, top_k, top_p, "
                 "min_p and penalties); leave it out or set it to " + std::to_string(u.off));
  return std::nullopt;
}

// format: "json" (any JSON object) or a JSON schema: the output's shape.
std::optional<NodeError> copy_format(const json& j, ordered& chat) {
  auto it = j.find("format");
  if (it == j.end() || it->is_null() || *it == "") return std::nullopt;
  if (*it == "json") {
    chat["response_format"] = {{"type", "json_object"}};
  } else if (it->is_object()) {
    chat["response_format"] = {{"type", "json_schema"},
                               {"json_schema", {{"name", "format"}, {"schema", to_ordered_json(*it)}}}};
  } else {
    return bad("format must be \"json\" or a JSON schema object");
  }
  return std::nullopt;
}

// think: true or false (the template's enable_thinking), or a level
// ("low", "medium", "high") for templates that take reasoning_effort.
std::optional<NodeError> copy_think(const json& j, ordered& chat) {
  auto it = j.find("think");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_boolean()) {
    chat["chat_template_kwargs"] = {{"enable_thinking", it->get<bool>()}};
  } else if (*it == "low" || *it == "medium" || *it == "high") {
    chat["chat_template_kwargs"] = {{"enable_thinking", true}};
    chat["reasoning_effort"] = *it;
  } else {
    return bad("think must be true, false, \"low\", \"medium\" or \"high\"");
  }
  return std::nullopt;
}

// What both endpoints share: model, stream, keep_alive, options, format.
std::optional<NodeError> copy_common(const json& j, bool raw, ordered& chat, OllamaRequest& out) {
  if (present(j, "model")) {
    if (!j["model"].is_string()) return bad("model must be a string");
    out.model = j["model"].get<std::string>();
    chat["model"] = out.model;
  }
  if (present(j, "stream")) {
    if (!j["stream"].is_boolean()) return bad("stream must be true or false");
    out.stream = j["stream"].get<bool>();
  }
  chat["stream"] = out.stream;
  if (auto e = check_keep_alive(j)) return e;
  if (auto e = copy_options(j, chat, out)) return e;
  // A completions request stops after 16 tokens unless told; Ollama's
  // default is no limit, which the context bounds anyway.
  if (raw && !chat.contains("max_tokens")) chat["max_tokens"] = 1 << 24;
  return copy_format(j, chat);
}

// Ollama's tool calls carry no ids: each gets one here, and the tool
// results that follow answer them in order, as the template expects ids
// to pair them.
struct CallIds {
  size_t next = 0;      // the next id to give a call
  size_t answered = 0;  // the next call a tool result answers
  static std::string id(size_t k) { return "call_" + std::to_string(k); }
};

Outcome<ordered> assistant_calls(const json& calls, const std::string& at, CallIds& ids) {
  if (!calls.is_array()) return bad(at + " must be an array");
  ordered out = ordered::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string where = at + "[" + std::to_string(k) + "]";
    const json& c = calls[k];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      return bad(where + " must be {\"function\": {\"name\", \"arguments\"}}");
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string()) return bad(where + ".function.name must be a string");
    json arguments = f.value("arguments", json::object());
    if (!arguments.is_object()) return bad(where + ".function.arguments must be an object");
    out.push_back({{"id", CallIds::id(ids.next++)},
                   {"type", "function"},
                   {"function", {{"name", f["name"]}, {"arguments", to_ordered_json(arguments)}}}});
  }
  return out;
}

// One Ollama message as a chat message: tool_calls and thinking on an
// assistant's, tool_name on a tool result's.
Outcome<ordered> chat_message(const json& m, const std::string& at, CallIds& ids) {
  if (!m.is_object()) return bad(at + " must be an object");
  const json role = m.value("role", json());
  if (role != "system" && role != "user" && role != "assistant" && role != "tool")
    return bad(at + ".role must be \"system\", \"user\", \"assistant\" or \"tool\"");
  if (auto e = refuse_images(m, at + ".")) return *e;
  ordered out = {{"role", role}};
  const json content = m.value("content", json(""));
  if (!content.is_string()) return bad(at + ".content must be a string");
  out["content"] = content;
  if (role == "assistant" && present(m, "tool_calls")) {
    auto calls = assistant_calls(m["tool_calls"], at + ".tool_calls", ids);
    if (!calls.ok()) return calls.error();
    if (!calls->empty()) out["tool_calls"] = std::move(*calls);
  }
  if (role == "assistant" && present(m, "thinking")) {
    if (!m["thinking"].is_string()) return bad(at + ".thinking must be a string");
    out["reasoning_content"] = m["thinking"];
  }
  if (role == "tool") {
    out["tool_call_id"] = CallIds::id(ids.answered < ids.next ? ids.answered++ : ids.next);
    if (present(m, "tool_name")) {
      if (!m["tool_name"].is_string()) return bad(at + ".tool_name must be a string");
      out["name"] = m["tool_name"];
    }
  }
  return out;
}

// The chat parser's field names, where an error from it names one, as
// Ollama's request spells them.
std::string ollama_names(std::string message) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"response_format.json_schema.schema", "format"}, {"response_format", "format"},
      {"max_tokens", "options.num_predict"},            {"temperature", "options.temperature"},
      {"top_p", "options.top_p"},                       {"top_k", "options.top_k"},
      {"min_p", "options.min_p"},                       {"seed", "options.seed"},
      {"stop", "options.stop"},                         {"repeat_penalty", "options.repeat_penalty"},
      {"repeat_last_n", "options.repeat_last_n"},       {"presence_penalty", "options.presence_penalty"},
      {"frequency_penalty", "options.frequency_penalty"}};
  for (const auto& [chat, ollama] : kNames)
    if (message.starts_with(chat)) return ollama + message.substr(std::string_view(chat).size());
  return message;
}

Outcome<OllamaRequest> finish(ordered chat, OllamaRequest out, bool raw, const RequestLimits& limits) {
  auto request = raw ? completion_request_of(json(chat), limits) : chat_request_of(json(chat), limits);
  if (!request.ok()) return bad(ollama_names(request.error().message));
  out.chat_body = chat.dump();
  out.chat = std::move(*request);
  return out;
}

}  // namespace

Outcome<OllamaRequest> parse_ollama_chat(std::string_view body, const RequestLimits& limits) {
  auto parsed = parse_request_object(body, limits);
  if (!parsed.ok()) return parsed.error();
  const json& j = *parsed;
  OllamaRequest out;
  ordered chat = ordered::object();
  if (auto e = copy_common(j, false, chat, out)) return *e;
  if (auto e = copy_think(j, chat)) return *e;
  ordered messages = ordered::array();
  if (present(j, "messages")) {
    if (!j["messages"].is_array()) return bad("messages must be an array");
    CallIds ids;
    for (size_t i = 0; i < j["messages"].size(); ++i) {
      auto m = chat_message(j["messages"][i], "messages[" + std::to_string(i) + "]", ids);
      if (!m.ok()) return m.error();
      messages.push_back(std::move(*m));
    }
  }
  if (messages.empty()) {
    out.load_only = true;
    return out;
  }
  chat["messages"] = std::move(messages);
  if (present(j, "tools")) chat["tools"] = to_ordered_json(j["tools"]);  // OpenAI's shape already
  return finish(std::move(chat), std::move(out), false, limits);
}

Outcome<OllamaRequest> parse_ollama_generate(std::string_view body, const RequestLimits& limits) {
  auto parsed = parse_request_object(body, limits);
  if (!parsed.ok()) return parsed.error();
  const json& j = *parsed;
  bool raw = false;
  if (present(j, "raw")) {
    if (!j["raw"].is_boolean()) return bad("raw must be true or false");
    raw = j["raw"].get<bool>();
  }
  OllamaRequest out;
  ordered chat = ordered::object();
  if (auto e = copy_common(j, raw, chat, out)) return *e;
  if (auto e = refuse_images(j, "")) return *e;
  if (present(j, "template") && j["template"] != "")
    return bad("template is not supported: revis renders the tier's Jinja chat template (revis serve "
               "--chat-template); send raw: true with a prompt formatted already");
  if (present(j, "context") && j["context"] != json::array())
    return bad("context is not supported (revis keeps no token context between requests): send the conversation "
               "to /api/chat");
  if (present(j, "suffix") && j["suffix"] != "") return bad("suffix is not supported (no fill-in-the-middle)");
  const json prompt = j.value("prompt", json(""));
  if (!prompt.is_string()) return bad("prompt must be a string");
  if (prompt == "") {
    out.load_only = true;
    return out;
  }
  if (raw) {
    // Ollama ignores system and think with raw: the prompt is all there is.
    chat["prompt"] = prompt;
    return finish(std::move(chat), std::move(out), true, limits);
  }
  if (auto e = copy_think(j, chat)) return *e;
  ordered messages = ordered::array();
  if (present(j, "system")) {
    if (!j["system"].is_string()) return bad("system must be a string");
    messages.push_back({{"role", "system"}, {"content", j["system"]}});
  }
  messages.push_back({{"role", "user"}, {"content", prompt}});
  chat["messages"] = std::move(messages);
  return finish(std::move(chat), std::move(out), false, limits);
}

std::optional<NodeError> check_num_ctx(const OllamaRequest& request, int ctx) {
  if (!request.num_ctx || ctx <= 0 || *request.num_ctx <= ctx) return std::nullopt;
  return bad("options.num_ctx " + std::to_string(*request.num_ctx) + " is larger than the context this node gives the "
             "model (" + std::to_string(ctx) + " tokens; revis serve -c sets it)");
}

Outcome<OllamaEmbedRequest> parse_ollama_embed(std::string_view body, bool legacy, const RequestLimits& limits) {
  auto parsed = parse_request_object(body, limits);
  if (!parsed.ok()) return parsed.error();
  const json& j = *parsed;
  ordered openai = ordered::object();
  if (present(j, "model")) {
    if (!j["model"].is_string()) return bad("model must be a string");
    openai["model"] = j["model"];
  }
  const char* field = legacy ? "prompt" : "input";
  if (!present(j, field)) return bad(std::string(field) + " is missing");
  const json& input = j[field];
  const bool strings = input.is_array() && !legacy && std::all_of(input.begin(), input.end(), [](const json& s) {
                         return s.is_string();
                       });
  if (!input.is_string() && !strings)
    return bad(legacy ? "prompt must be a string" : "input must be a string or an array of strings");
  openai["input"] = to_ordered_json(input);
  if (auto e = check_keep_alive(j)) return *e;
  // An embedding has the model's width; shortening it would change it.
  if (present(j, "dimensions")) return bad("dimensions is not supported (an embedding has the model's width)");
  OllamaEmbedRequest out{.openai_body = openai.dump(), .embed = {}};
  auto request = parse_embedding_request(out.openai_body, limits);
  if (!request.ok()) {
    std::string message = request.error().message;
    if (legacy && message.starts_with("input")) message.replace(0, 5, "prompt");
    return bad(std::move(message));
  }
  out.embed = std::move(*request);
  return out;
}

}  // namespace revis::node
