#include "api/anthropic_api.h"

#include <nlohmann/json.hpp>

#include "base/json_reader.h"

#include "base/json_text.h"

namespace revis::node {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

NodeError bad(std::string message) { return NodeError{ErrorCode::kBadRequest, std::move(message)}; }

std::string type_of(const json& block) {
  auto it = block.find("type");
  return it != block.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A text block's text, or none when `block` is not {"type": "text", "text": "..."}.
std::optional<std::string> block_text(const json& block) {
  if (!block.is_object() || type_of(block) != "text") return std::nullopt;
  auto text = block.find("text");
  if (text == block.end() || !text->is_string()) return std::nullopt;
  return text->get<std::string>();
}

// `system`: a string or an array of text blocks.
Outcome<std::string> system_text(const json& system) {
  if (system.is_string()) return system.get<std::string>();
  if (!system.is_array()) return bad("system must be a string or an array of text blocks");
  std::string text;
  for (size_t k = 0; k < system.size(); ++k) {
    auto part = block_text(system[k]);
    if (!part) return bad("system[" + std::to_string(k) + "] must be {\"type\": \"text\", \"text\": ...}");
    text += *part;
  }
  return text;
}

// A tool_result block's content: a string, or text blocks.
Outcome<std::string> tool_result_text(const json& block, const std::string& at) {
  auto content = block.find("content");
  if (content == block.end() || content->is_null()) return std::string();
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) return bad(at + ".content must be a string or an array of text blocks");
  std::string text;
  for (size_t k = 0; k < content->size(); ++k) {
    auto part = block_text((*content)[k]);
    if (!part)
      return bad(at + ".content[" + std::to_string(k) + "]: only text blocks are supported in a tool result");
    text += *part;
  }
  return text;
}

// One Anthropic message as chat messages, appended to `out`: a user
// message's tool_result blocks each become a `tool` message, in place
// among its text; an assistant message's thinking, text and tool_use
// blocks become one assistant message.
std::optional<NodeError> append_message(const json& m, const std::string& at, ordered& out) {
  if (!m.is_object()) return bad(at + " must be an object");
  auto role_it = m.find("role");
  const std::string role = role_it != m.end() && role_it->is_string() ? role_it->get<std::string>() : "";
  if (role != "user" && role != "assistant") return bad(at + ".role must be \"user\" or \"assistant\"");
  auto content = m.find("content");
  if (content == m.end()) return bad(at + ".content is missing");
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", content->get<std::string>()}});
    return std::nullopt;
  }
  if (!content->is_array()) return bad(at + ".content must be a string or an array of content blocks");
  const bool assistant = role == "assistant";
  std::string text, thinking;
  ordered calls = ordered::array();
  auto flush_user_text = [&] {
    if (!text.empty()) out.push_back({{"role", "user"}, {"content", text}});
    text.clear();
  };
  for (size_t k = 0; k < content->size(); ++k) {
    const json& block = (*content)[k];
    const std::string where = at + ".content[" + std::to_string(k) + "]";
    const std::string type = block.is_object() ? type_of(block) : "";
    if (type == "text") {
      auto part = block_text(block);
      if (!part) return bad(where + ".text must be a string");
      text += *part;
    } else if (type == "thinking" && assistant) {
      auto t = block.find("thinking");
      if (t == block.end() || !t->is_string()) return bad(where + ".thinking must be a string");
      thinking += t->get<std::string>();
    } else if (type == "redacted_thinking" && assistant) {
      // Another model's encrypted thinking: nothing this model can read.
    } else if (type == "tool_use" && assistant) {
      auto id = block.find("id");
      auto name = block.find("name");
      auto input = block.find("input");
      if (id == block.end() || !id->is_string() || name == block.end() || !name->is_string() ||
          name->get_ref<const std::string&>().empty())
        return bad(where + " must have a string id and a non-empty name");
      if (input != block.end() && !input->is_object()) return bad(where + ".input must be an object");
      calls.push_back({{"id", *id},
                       {"type", "function"},
                       {"function",
                        {{"name", *name}, {"arguments", input != block.end() ? input->dump() : std::string("{}")}}}});
    } else if (type == "tool_result" && !assistant) {
      auto id = block.find("tool_use_id");
      if (id == block.end() || !id->is_string() || id->get_ref<const std::string&>().empty())
        return bad(where + ".tool_use_id must be a non-empty string (the tool_use this result answers)");
      auto result = tool_result_text(block, where);
      if (!result.ok()) return result.error();
      // The model reads whether the tool failed as it reads the result.
      auto error = block.find("is_error");
      if (error != block.end() && !error->is_null() && !error->is_boolean()) return bad(where + ".is_error must be true or false");
      if (error != block.end() && error->is_boolean() && error->get<bool>()) *result = "Error: " + *result;
      flush_user_text();
      out.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", *result}});
    } else {
      return bad(where + ": a " + (type.empty() ? std::string("block without a type") : "\"" + type + "\" block") +
                 " is not supported in a" + (assistant ? "n assistant" : " user") + " message (" +
                 (assistant ? "text, thinking, tool_use" : "text, tool_result") + ")");
    }
  }
  if (!assistant) {
    flush_user_text();
    return std::nullopt;
  }
  ordered message = {{"role", "assistant"}, {"content", text}};
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  if (!thinking.empty()) message["reasoning_content"] = thinking;
  out.push_back(std::move(message));
  return std::nullopt;
}

// tools: client tools ({name, description, input_schema}) as function tools.
Outcome<ordered> chat_tools(const json& tools) {
  if (!tools.is_array()) return bad("tools must be an array");
  ordered out = ordered::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& tool = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) return bad(at + " must be an object");
    const std::string type = type_of(tool);
    if (!type.empty() && type != "custom")
      return bad(at + ".type \"" + type + "\" is not supported (only client tools with an input_schema)");
    auto schema = tool.find("input_schema");
    if (schema == tool.end() || !schema->is_object()) return bad(at + ".input_schema must be a JSON Schema object");
    ordered function = {{"name", tool.value("name", json()).is_string() ? tool["name"] : json("")},
                        {"parameters", to_ordered_json(*schema)}};
    if (auto d = tool.find("description"); d != tool.end() && !d->is_null()) {
      if (!d->is_string()) return bad(at + ".description must be a string");
      function["description"] = *d;
    }
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

// tool_choice {type: auto | any | tool | none, name, disable_parallel_tool_use}.
std::optional<NodeError> set_tool_choice(const json& choice, ordered& chat) {
  if (!choice.is_object()) return bad("tool_choice must be an object with a type");
  const std::string type = type_of(choice);
  if (type == "auto") {
    chat["tool_choice"] = "auto";
  } else if (type == "any") {
    chat["tool_choice"] = "required";
  } else if (type == "none") {
    chat["tool_choice"] = "none";
  } else if (type == "tool") {
    auto name = choice.find("name");
    if (name == choice.end() || !name->is_string()) return bad("tool_choice.name must be a string");
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  } else {
    return bad("tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\"");
  }
  if (auto p = choice.find("disable_parallel_tool_use"); p != choice.end() && !p->is_null()) {
    if (!p->is_boolean()) return bad("tool_choice.disable_parallel_tool_use must be true or false");
    chat["parallel_tool_calls"] = !p->get<bool>();
  }
  return std::nullopt;
}

// thinking {type: enabled | adaptive | disabled}: the template's
// enable_thinking. A budget is refused: nothing bounds the thinking apart
// from the answer (max_tokens).
std::optional<NodeError> set_thinking(const json& thinking, ordered& chat) {
  if (!thinking.is_object()) return bad("thinking must be an object with a type");
  const std::string type = type_of(thinking);
  if (type != "enabled" && type != "adaptive" && type != "disabled")
    return bad("thinking.type must be \"enabled\", \"adaptive\" or \"disabled\"");
  if (auto budget = thinking.find("budget_tokens"); budget != thinking.end() && !budget->is_null())
    return bad("thinking.budget_tokens is not supported (revis bounds the thinking only by max_tokens): send "
               "{\"type\": \"adaptive\"}, or leave thinking out, as a thinking model thinks by default");
  chat["chat_template_kwargs"] = {{"enable_thinking", type != "disabled"}};
  return std::nullopt;
}

// Sampling and length fields, checked with Anthropic's ranges.
std::optional<NodeError> copy_sampling(const json& j, ordered& chat) {
  auto max_tokens = j.find("max_tokens");
  if (max_tokens == j.end() || !max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1)
    return bad("max_tokens is required: a positive integer");
  chat["max_tokens"] = *max_tokens;
  for (const char* key : {"temperature", "top_p"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() <= 1))
      return bad(std::string(key) + " must be a number in [0, 1]");
    chat[key] = *it;
  }
  if (auto it = j.find("top_k"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) return bad("top_k must be a non-negative integer");
    chat["top_k"] = *it;
  }
  if (auto it = j.find("stop_sequences"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() > 16) return bad("stop_sequences must be an array of at most 16 strings");
    for (const json& s : *it)
      if (!s.is_string()) return bad("stop_sequences must be an array of at most 16 strings");
    chat["stop"] = *it;
  }
  if (auto it = j.find("stream"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("stream must be true or false");
    chat["stream"] = *it;
  }
  return std::nullopt;
}

// The chat parser's field names, where an error from it names one, as
// Anthropic's request spells them.
std::string anthropic_names(std::string message) {
  for (const auto& [chat, anthropic] : {std::pair<std::string, std::string>{".function.parameters", ".input_schema"},
                                        {".function.name", ".name"}}) {
    for (size_t at = message.find(chat); at != std::string::npos; at = message.find(chat, at + anthropic.size()))
      message.replace(at, chat.size(), anthropic);
  }
  return message;
}

const char* stop_reason(const JobResult& r) {
  if (!r.tool_calls.empty()) return "tool_use";
  if (r.stop_reason == "length" || r.stop_reason == "context") return "max_tokens";
  if (r.stop_reason == "stop" && !r.stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

json stop_sequence(const JobResult& r) { return r.stop_sequence.empty() ? json(nullptr) : json(r.stop_sequence); }

// Anthropic counts cache reads apart from the input they saved.
json usage(const JobStats& s) {
  return {{"input_tokens", s.prompt_tokens - s.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", s.cached_tokens},
          {"output_tokens", s.generated_tokens}};
}

json tool_use_block(const ToolCall& call) {
  json input = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (!input.is_object()) input = json::object();  // calls are parsed as objects; never reached
  return {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", std::move(input)}};
}

const char* error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 503: return "overloaded_error";
    default: return "api_error";
  }
}

class AnthropicFormat : public AnswerFormat {
 public:
  AnthropicFormat(std::string id, std::string model) : id_(std::move(id)), model_(std::move(model)) {}

  void begin(size_t, Events& out) override {
    // The prompt's size is known when the answer ends: message_delta has it.
    json message = message_head();
    message["content"] = json::array();
    message["stop_reason"] = nullptr;
    message["stop_sequence"] = nullptr;
    message["usage"] = usage(JobStats{});
    emit(out, "message_start", {{"message", std::move(message)}});
  }
  void reasoning(size_t, std::string_view text, Events& out) override {
    if (text.empty()) return;
    open(out, Block::kThinking);
    emit(out, "content_block_delta",
         {{"index", index_}, {"delta", {{"type", "thinking_delta"}, {"thinking", std::string(text)}}}});
  }
  void content(size_t, std::string_view text, std::span<const LogprobEntry>, Events& out) override {
    if (text.empty()) return;
    open(out, Block::kText);
    emit(out, "content_block_delta", {{"index", index_}, {"delta", {{"type", "text_delta"}, {"text", std::string(text)}}}});
  }
  void end(size_t, const JobResult& r, std::span<const LogprobEntry>, Events& out) override {
    close_block(out);
    // Calls are whole only at the end: each is a block with one delta.
    for (const ToolCall& call : r.tool_calls) {
      json block = tool_use_block(call);
      block["input"] = json::object();
      emit(out, "content_block_start", {{"index", index_}, {"content_block", std::move(block)}});
      emit(out, "content_block_delta",
           {{"index", index_}, {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}});
      emit(out, "content_block_stop", {{"index", index_++}});
    }
    emit(out, "message_delta",
         {{"delta", {{"stop_reason", stop_reason(r)}, {"stop_sequence", stop_sequence(r)}}}, {"usage", usage(r.stats)}});
  }
  void close(const JobStats&, Events& out) override { emit(out, "message_stop", json::object()); }
  void failed(const NodeError& error, Events& out) override { out.push_back({"error", anthropic_error_for(error)}); }

  std::string response(std::span<const JobResult> choices, const JobStats&) override {
    const JobResult& r = choices.front();
    json content = json::array();
    if (r.reasoning && !r.reasoning->empty())
      content.push_back({{"type", "thinking"}, {"thinking", *r.reasoning}, {"signature", ""}});
    if (!r.text.empty()) content.push_back({{"type", "text"}, {"text", r.text}});
    for (const ToolCall& call : r.tool_calls) content.push_back(tool_use_block(call));
    json message = message_head();
    message["content"] = std::move(content);
    message["stop_reason"] = stop_reason(r);
    message["stop_sequence"] = stop_sequence(r);
    message["usage"] = usage(r.stats);
    return json_text(message);
  }
  std::string error_body(const NodeError& error) override { return anthropic_error_for(error); }

 private:
  enum class Block { kNone, kThinking, kText };

  json message_head() const { return {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_}}; }

  // An event whose data is `fields` with "type": name, as Anthropic's are.
  static void emit(Events& out, const char* name, json fields) {
    fields["type"] = name;
    out.push_back({name, json_text(fields)});
  }
  void open(Events& out, Block block) {
    if (open_ == block) return;
    close_block(out);
    open_ = block;
    json start = block == Block::kThinking ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                           : json{{"type", "text"}, {"text", ""}};
    emit(out, "content_block_start", {{"index", index_}, {"content_block", std::move(start)}});
  }
  void close_block(Events& out) {
    if (open_ == Block::kNone) return;
    emit(out, "content_block_stop", {{"index", index_++}});
    open_ = Block::kNone;
  }

  const std::string id_, model_;
  Block open_ = Block::kNone;
  size_t index_ = 0;  // of the open block, or of the next one
};

}  // namespace

Outcome<MessagesRequest> parse_messages_request(std::string_view body, const RequestLimits& limits) {
  auto parsed = parse_request_object(body, limits);
  if (!parsed.ok()) return parsed.error();
  return messages_request_of(*parsed, limits);
}

Outcome<MessagesRequest> parse_count_tokens_request(std::string_view body, const RequestLimits& limits) {
  auto parsed = parse_request_object(body, limits);
  if (!parsed.ok()) return parsed.error();
  // The prompt depends on neither. Where the count needs a run (the
  // tier's model is not loaded here), the run is as short as it can be.
  (*parsed)["max_tokens"] = 1;
  (*parsed)["stream"] = false;
  return messages_request_of(*parsed, limits);
}

Outcome<MessagesRequest> messages_request_of(const json& j, const RequestLimits& limits) {
  ordered chat = ordered::object();
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return bad("model must be a string");
    chat["model"] = *it;
  }
  if (auto e = copy_sampling(j, chat)) return *e;
  ordered messages = ordered::array();
  if (auto it = j.find("system"); it != j.end() && !it->is_null()) {
    auto text = system_text(*it);
    if (!text.ok()) return text.error();
    messages.push_back({{"role", "system"}, {"content", *text}});
  }
  auto list = j.find("messages");
  if (list == j.end() || !list->is_array() || list->empty()) return bad("messages must be a non-empty array");
  for (size_t i = 0; i < list->size(); ++i)
    if (auto e = append_message((*list)[i], "messages[" + std::to_string(i) + "]", messages)) return *e;
  // Anthropic continues a final assistant message; a chat template closes
  // it and starts another.
  if (list->back().is_object() && list->back().value("role", json()) == "assistant")
    return bad("messages: a final assistant message (a prefill to continue) is not supported");
  chat["messages"] = std::move(messages);
  if (auto it = j.find("tools"); it != j.end() && !it->is_null()) {
    auto tools = chat_tools(*it);
    if (!tools.ok()) return tools.error();
    chat["tools"] = std::move(*tools);
  }
  if (auto it = j.find("tool_choice"); it != j.end() && !it->is_null())
    if (auto e = set_tool_choice(*it, chat)) return *e;
  if (auto it = j.find("thinking"); it != j.end() && !it->is_null())
    if (auto e = set_thinking(*it, chat)) return *e;
  for (const char* key : {"mcp_servers", "container", "context_management"})
    if (auto it = j.find(key); it != j.end() && !it->is_null()) return bad(std::string(key) + " is not supported");
  // Read as it is, not dumped and parsed again; the text is for a peer.
  auto request = chat_request_of(json(chat), limits);
  if (!request.ok()) return bad(anthropic_names(request.error().message));
  return MessagesRequest{.chat_body = chat.dump(), .chat = std::move(*request)};
}

std::unique_ptr<AnswerFormat> anthropic_format(std::string id, std::string model) {
  return std::make_unique<AnthropicFormat>(std::move(id), std::move(model));
}

std::string count_tokens_response(int input_tokens) { return json_text({{"input_tokens", input_tokens}}); }

namespace {

// A count made by running the request: the prompt its answer reports.
class CountTokensFormat : public WholeAnswerFormat {
 public:
  std::string response(std::span<const JobResult>, const JobStats& usage) override {
    return count_tokens_response(usage.prompt_tokens);
  }
  std::string error_body(const NodeError& error) override { return anthropic_error_for(error); }
};

}  // namespace

std::unique_ptr<AnswerFormat> count_tokens_format() { return std::make_unique<CountTokensFormat>(); }

std::string anthropic_error(const std::string& type, const std::string& message) {
  return json_text({{"type", "error"}, {"error", {{"type", type}, {"message", message}}}});
}

std::string anthropic_error_for(const NodeError& e) { return anthropic_error(error_type(http_status_for(e.code)), e.message); }

}  // namespace revis::node
