#include "api/responses_api.h"

#include <cmath>
#include <ctime>
#include <optional>
#include <utility>

#include "base/json_reader.h"
#include "base/json_text.h"
#include "protocol/result_json.h"

namespace revis::node {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

NodeError bad(std::string message) { return NodeError{ErrorCode::kBadRequest, std::move(message)}; }

// j[key] when it is there and not null.
const json* given(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string string_at(const json& j, const char* key) {
  const json* v = j.is_object() ? given(j, key) : nullptr;
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

// A message's content, or a function call's output: a string, or text
// parts (input_text, output_text, and an assistant's refusal) joined.
Outcome<std::string> content_text(const json& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return bad(at + " must be a string or an array of content parts");
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const std::string where = at + "[" + std::to_string(k) + "]";
    const std::string type = string_at(content[k], "type");
    const char* key = type == "input_text" || type == "output_text" ? "text" : type == "refusal" ? "refusal" : nullptr;
    if (!key)
      return bad(where + ": " + (type.empty() ? std::string("a part without a type is") : "\"" + type + "\" parts are") +
                 " not supported (input_text, output_text, refusal: revis reads text only)");
    auto t = content[k].find(key);
    if (t == content[k].end() || !t->is_string()) return bad(where + "." + key + " must be a string");
    text += t->get<std::string>();
  }
  return text;
}

// A reasoning item's text: its reasoning_text content, or else its summary.
Outcome<std::string> reasoning_text(const json& item, const std::string& at) {
  for (const char* key : {"content", "summary"}) {
    const json* parts = given(item, key);
    if (!parts) continue;
    if (!parts->is_array()) return bad(at + "." + key + " must be an array");
    std::string text;
    for (size_t k = 0; k < parts->size(); ++k) {
      auto t = (*parts)[k].is_object() ? (*parts)[k].find("text") : (*parts)[k].end();
      if (t == (*parts)[k].end() || !t->is_string())
        return bad(at + "." + key + "[" + std::to_string(k) + "].text must be a string");
      text += (text.empty() ? "" : "\n\n") + t->get<std::string>();
    }
    if (!text.empty()) return text;
  }
  return std::string();
}

// Items as chat messages, in order. A reasoning item's text goes with the
// assistant message after it, and an assistant's message and the function
// calls that follow it are one assistant turn, as chat templates write a
// turn.
// A namespace tool's function as the chat request names it.
std::string qualified_name(const std::string& ns, const std::string& name) { return ns + "__" + name; }

class ChatMessages {
 public:
  explicit ChatMessages(const RequestLimits& limits) : limits_(limits) {}

  void system(const std::string& text) { push({{"role", "system"}, {"content", text}}); }
  std::optional<NodeError> add(const json& item, const std::string& at);
  ordered take() { return std::move(messages_); }

 private:
  void push(ordered message) {
    messages_.push_back(std::move(message));
    turn_open_ = false;
  }
  // The assistant message a call joins (`join`: the turn still open), or a new one.
  ordered& assistant(bool join);
  std::optional<NodeError> add_message(const json& item, const std::string& at);
  std::optional<NodeError> add_call(const json& item, const std::string& at);
  std::optional<NodeError> add_call_output(const json& item, const std::string& at);

  const RequestLimits& limits_;
  ordered messages_ = ordered::array();
  bool turn_open_ = false;  // the last message is an assistant turn that calls may join
  std::string reasoning_;   // for the next assistant message
};

ordered& ChatMessages::assistant(bool join) {
  if (!join || !turn_open_) {
    messages_.push_back({{"role", "assistant"}, {"content", ""}});
    turn_open_ = true;
  }
  ordered& m = messages_.back();
  if (!reasoning_.empty()) m["reasoning_content"] = std::exchange(reasoning_, {});
  return m;
}

std::optional<NodeError> ChatMessages::add(const json& item, const std::string& at) {
  if (!item.is_object()) return bad(at + " must be an object");
  std::string type = string_at(item, "type");
  if (type.empty() && item.contains("role")) type = "message";  // the short form: {role, content}
  if (type == "message") return add_message(item, at);
  if (type == "function_call") return add_call(item, at);
  if (type == "function_call_output") return add_call_output(item, at);
  if (type == "reasoning") {
    auto text = reasoning_text(item, at);
    if (!text.ok()) return text.error();
    reasoning_ += *text;
    turn_open_ = false;
    return std::nullopt;
  }
  if (type == "item_reference")
    return bad(at + ": item_reference is not supported (send the item itself, or continue with previous_response_id)");
  return bad(at + (type.empty() ? std::string(" needs a type") : ".type \"" + type + "\" is not supported") +
             " (message, function_call, function_call_output, reasoning)");
}

std::optional<NodeError> ChatMessages::add_message(const json& item, const std::string& at) {
  const std::string role = string_at(item, "role");
  if (role != "user" && role != "system" && role != "developer" && role != "assistant")
    return bad(at + ".role must be \"user\", \"system\", \"developer\" or \"assistant\"");
  auto content = item.find("content");
  if (content == item.end()) return bad(at + ".content is missing");
  auto text = content_text(*content, at + ".content");
  if (!text.ok()) return text.error();
  if (role == "assistant") {
    assistant(false)["content"] = std::move(*text);
    return std::nullopt;
  }
  push({{"role", role}, {"content", std::move(*text)}});
  return std::nullopt;
}

std::optional<NodeError> ChatMessages::add_call(const json& item, const std::string& at) {
  const std::string call_id = string_at(item, "call_id"), ns = string_at(item, "namespace");
  const std::string name = ns.empty() ? string_at(item, "name") : qualified_name(ns, string_at(item, "name"));
  if (call_id.empty()) return bad(at + ".call_id must be a non-empty string");
  if (name.empty()) return bad(at + ".name must be a non-empty string");
  const json* arguments = given(item, "arguments");
  if (!arguments || !arguments->is_string()) return bad(at + ".arguments must be a string (a JSON object)");
  // Read here so that an error names this field; the chat request takes the
  // text, whose keys keep their order.
  auto read = read_json(arguments->get_ref<const std::string&>(), limits_.max_json_depth);
  if (!read.ok()) return bad(at + ".arguments: " + read.status().message());
  if (!read->is_object()) return bad(at + ".arguments must be a JSON object (as a string)");
  ordered& m = assistant(true);
  if (!m.contains("tool_calls")) m["tool_calls"] = ordered::array();
  m["tool_calls"].push_back(
      {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", *arguments}}}});
  return std::nullopt;
}

std::optional<NodeError> ChatMessages::add_call_output(const json& item, const std::string& at) {
  const std::string call_id = string_at(item, "call_id");
  if (call_id.empty()) return bad(at + ".call_id must be a non-empty string (the function_call this answers)");
  auto output = item.find("output");
  if (output == item.end()) return bad(at + ".output is missing");
  auto text = content_text(*output, at + ".output");
  if (!text.ok()) return text.error();
  push({{"role", "tool"}, {"tool_call_id", call_id}, {"content", std::move(*text)}});
  return std::nullopt;
}

// Fields that would change the answer and that revis does not do.
std::optional<NodeError> refuse_unsupported(const json& j) {
  static const std::pair<const char*, const char*> refused[] = {
      {"conversation", "a conversation object is not supported: continue with previous_response_id"},
      {"prompt", "a stored prompt template is not supported: send instructions and input"},
      {"context_management", "context_management is not supported: revis does not compact a conversation"},
  };
  for (const auto& [key, why] : refused)
    if (given(j, key)) return bad(why);
  if (const json* b = given(j, "background"); b && *b != false)
    return bad("background: true is not supported (a response runs while its request is open)");
  if (const json* t = given(j, "truncation"); t && *t != "disabled")
    return bad("truncation must be \"disabled\": revis does not drop items from a conversation (a conversation too "
               "long for the context is a 400)");
  return std::nullopt;
}

// A function tool ({type: function, name, description, parameters,
// strict}) in the chat request's shape; the chat parser checks the rest.
Outcome<ordered> chat_tool(const json& tool, const std::string& at) {
  const std::string type = string_at(tool, "type");
  if (!tool.is_object() || type != "function")
    return bad(at + (type.empty() ? std::string(" must be an object with a type") : ".type \"" + type + "\" is not supported") +
               " (only function tools: revis runs no tools of its own)");
  ordered function = {{"name", string_at(tool, "name")}};
  for (const char* key : {"description", "parameters"})
    if (const json* v = given(tool, key)) function[key] = to_ordered_json(*v);
  if (const json* strict = given(tool, "strict")) {
    if (!strict->is_boolean()) return bad(at + ".strict must be true or false");
    function["strict"] = *strict;  // calls always follow the parameters, strict or not
  }
  return ordered{{"type", "function"}, {"function", std::move(function)}};
}

// The functions of a namespace tool ({type: namespace, name, description,
// tools: function tools}) as chat tools named NAMESPACE__NAME, each
// description led by the namespace's; `namespaced` learns the names.
std::optional<NodeError> add_namespace_tools(const json& tool, const std::string& at, ordered& tools,
                                             NamespacedFunctions& namespaced) {
  const std::string ns = string_at(tool, "name");
  if (ns.empty()) return bad(at + ".name must be a non-empty string (the namespace)");
  const json* inner = given(tool, "tools");
  if (!inner || !inner->is_array() || inner->empty()) return bad(at + ".tools must be a non-empty array of function tools");
  const std::string about = string_at(tool, "description");
  for (size_t i = 0; i < inner->size(); ++i) {
    const std::string where = at + ".tools[" + std::to_string(i) + "]";
    auto chat = chat_tool((*inner)[i], where);
    if (!chat.ok()) return chat.error();
    ordered& function = (*chat)["function"];
    const std::string name = function.value("name", "");
    const std::string qualified = qualified_name(ns, name);
    if (qualified.size() > 64)
      return bad(where + ".name: \"" + qualified + "\" (the namespace, __, the name) is longer than 64 characters");
    function["name"] = qualified;
    if (!about.empty()) function["description"] = "(" + ns + ": " + about + ") " + function.value("description", "");
    namespaced[qualified] = {ns, name};
    tools.push_back(std::move(*chat));
  }
  return std::nullopt;
}

// tool_choice: "auto", "none", "required" or {type: function, name}.
Outcome<ordered> chat_tool_choice(const json& choice) {
  if (choice == "auto" || choice == "none" || choice == "required") return ordered(choice);
  const std::string type = string_at(choice, "type");
  if (choice.is_object() && type == "function") {
    const std::string name = string_at(choice, "name");
    if (name.empty()) return bad("tool_choice.name must be a non-empty string");
    return ordered{{"type", "function"}, {"function", {{"name", name}}}};
  }
  if (choice.is_object() && !type.empty())
    return bad("tool_choice.type \"" + type + "\" is not supported (function; only function tools are)");
  return bad("tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}");
}

// text.format: the chat request's response_format. verbosity is a hint
// revis's models have no switch for.
std::optional<NodeError> set_text_format(const json& text, ordered& chat) {
  if (!text.is_object()) return bad("text must be an object");
  const json* format = given(text, "format");
  if (!format) return std::nullopt;
  const std::string type = string_at(*format, "type");
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
    return std::nullopt;
  }
  if (type != "json_schema") return bad("text.format.type must be \"text\", \"json_object\" or \"json_schema\"");
  ordered spec = ordered::object();
  if (const json* name = given(*format, "name")) {
    if (!name->is_string()) return bad("text.format.name must be a string");
    spec["name"] = *name;
  }
  const json* schema = given(*format, "schema");
  if (!schema || !schema->is_object()) return bad("text.format.schema must be a JSON Schema object");
  spec["schema"] = to_ordered_json(*schema);
  if (const json* strict = given(*format, "strict")) {
    if (!strict->is_boolean()) return bad("text.format.strict must be true or false");
    spec["strict"] = *strict;  // the output follows the schema either way
  }
  chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
  return std::nullopt;
}

// reasoning.effort: the template's thinking switch. "none" turns thinking
// off; the others turn it on and give the template reasoning_effort in the
// three levels templates know (gpt-oss: low, medium, high). summary is
// ignored: the whole thinking comes back as reasoning_text.
std::optional<NodeError> set_reasoning(const json& reasoning, ordered& chat) {
  if (!reasoning.is_object()) return bad("reasoning must be an object");
  const json* effort = given(reasoning, "effort");
  if (!effort) return std::nullopt;
  static const std::pair<const char*, const char*> levels[] = {
      {"minimal", "low"}, {"low", "low"}, {"medium", "medium"}, {"high", "high"}, {"xhigh", "high"}};
  if (*effort == "none") {
    chat["chat_template_kwargs"] = {{"enable_thinking", false}};
    return std::nullopt;
  }
  for (const auto& [name, level] : levels)
    if (*effort == name) {
      chat["chat_template_kwargs"] = {{"enable_thinking", true}, {"reasoning_effort", level}};
      return std::nullopt;
    }
  return bad("reasoning.effort must be \"none\", \"minimal\", \"low\", \"medium\", \"high\" or \"xhigh\"");
}

// include (only message.output_text.logprobs changes anything revis
// returns; the rest name outputs of tools revis does not run) and top_logprobs.
std::optional<NodeError> set_logprobs(const json& j, ordered& chat) {
  bool logprobs = false;
  if (const json* include = given(j, "include")) {
    if (!include->is_array()) return bad("include must be an array of strings");
    for (const json& v : *include) {
      if (!v.is_string()) return bad("include must be an array of strings");
      logprobs = logprobs || v == "message.output_text.logprobs";
    }
  }
  const json* top = given(j, "top_logprobs");
  if (top && (!top->is_number_integer() || top->get<int64_t>() < 0 || top->get<int64_t>() > 20))
    return bad("top_logprobs must be an integer in [0, 20]");
  if (!logprobs) return std::nullopt;
  chat["logprobs"] = true;
  if (top) chat["top_logprobs"] = *top;
  return std::nullopt;
}

// The chat parser's field names, where an error from it names one, as the
// Responses request spells them (longest first).
std::string responses_names(std::string message) {
  static const std::pair<std::string, std::string> names[] = {
      {"response_format.json_schema.schema", "text.format.schema"},
      {"response_format", "text.format"},
      {".function.parameters", ".parameters"},
      {".function.description", ".description"},
      {".function.name", ".name"},
      {"max_tokens", "max_output_tokens"}};
  for (const auto& [chat, responses] : names)
    for (size_t at = message.find(chat); at != std::string::npos; at = message.find(chat, at + responses.size()))
      message.replace(at, chat.size(), responses);
  return message;
}

// The conversation before the answer: previous_response_id's, then `input`.
std::optional<NodeError> read_conversation(const json& j, const ResponseStore& store, ChatMessages& messages,
                                           json& conversation) {
  if (const json* previous = given(j, "previous_response_id")) {
    if (!previous->is_string()) return bad("previous_response_id must be a string");
    auto kept = store.find(previous->get<std::string>());
    if (!kept)
      return bad("previous_response_id: no response \"" + previous->get<std::string>() +
                 "\" is kept on this node (it was made with store: false, on another node or before a restart, "
                 "was deleted, or newer ones pushed it out: the node keeps the " +
                 std::to_string(ResponseStore::kMaxResponses) + " most recent, at most " +
                 std::to_string(ResponseStore::kMaxBytes >> 20) + " MiB)");
    for (const json* items : {&kept->conversation, &kept->output})
      for (const json& item : *items) {
        if (auto e = messages.add(item, "previous_response_id's items")) return e;
        conversation.push_back(item);
      }
  }
  const json* input = given(j, "input");
  if (!input) return bad("input is missing: a string, or an array of items");
  if (input->is_string()) {
    const json item = {{"type", "message"}, {"role", "user"}, {"content", *input}};
    conversation.push_back(item);
    return messages.add(item, "input");
  }
  if (!input->is_array()) return bad("input must be a string or an array of items");
  for (size_t i = 0; i < input->size(); ++i) {
    if (auto e = messages.add((*input)[i], "input[" + std::to_string(i) + "]")) return e;
    conversation.push_back((*input)[i]);
  }
  if (conversation.empty()) return bad("input is empty: give a message (a string, or an array of items)");
  return std::nullopt;
}

// The request fields that pass to the chat request under the same name.
std::optional<NodeError> copy_sampling(const json& j, ordered& chat) {
  if (const json* m = given(j, "model")) {
    if (!m->is_string()) return bad("model must be a string");
    chat["model"] = *m;
  }
  if (const json* max = given(j, "max_output_tokens")) {
    if (!max->is_number_integer() || max->get<int64_t>() < 1) return bad("max_output_tokens must be a positive integer");
    chat["max_tokens"] = *max;
  }
  for (const char* key : {"temperature", "top_p", "stream", "parallel_tool_calls"})
    if (const json* v = given(j, key)) chat[key] = *v;  // checked by the chat parser, which names them alike
  return std::nullopt;
}

// What the response object repeats of the request, as revis ran it.
json settings_of(const json& j, const OpenAiRequest& chat, bool store) {
  auto value_or = [&](const json& v, const char* key, json otherwise) {
    const json* given_value = given(v, key);
    return given_value ? *given_value : otherwise;
  };
  // The sampler's defaults, as a client would have written them (a float's
  // digits beyond these are noise).
  auto rounded = [](float v) { return std::round(v * 1e6) / 1e6; };
  const json reasoning = value_or(j, "reasoning", json::object());
  json text = value_or(j, "text", json::object());
  if (!given(text, "format")) text["format"] = {{"type", "text"}};
  return {{"instructions", value_or(j, "instructions", nullptr)},
          {"max_output_tokens", value_or(j, "max_output_tokens", nullptr)},
          {"metadata", value_or(j, "metadata", json::object())},
          {"parallel_tool_calls", chat.tool_use.parallel},
          {"previous_response_id", value_or(j, "previous_response_id", nullptr)},
          {"reasoning", {{"effort", value_or(reasoning, "effort", nullptr)}, {"summary", value_or(reasoning, "summary", nullptr)}}},
          {"store", store},
          {"temperature", value_or(j, "temperature", rounded(chat.sampling.temperature))},
          {"top_p", value_or(j, "top_p", rounded(chat.sampling.top_p))},
          {"text", std::move(text)},
          {"tool_choice", value_or(j, "tool_choice", "auto")},
          {"tools", value_or(j, "tools", json::array())},
          {"truncation", "disabled"},
          {"background", false},
          {"user", value_or(j, "user", nullptr)}};
}

// ---------------------------------------------------------------- answers

bool incomplete(const JobResult& r) { return r.stop_reason == "length" || r.stop_reason == "context"; }

json usage_json(const JobStats& s) {
  // The thinking's tokens are not counted apart from the answer's:
  // output_tokens holds both.
  return {{"input_tokens", s.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", s.cached_tokens}}},
          {"output_tokens", s.generated_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", s.prompt_tokens + s.generated_tokens}};
}

json reasoning_item(const std::string& id, const std::string& text) {
  return {{"id", id},
          {"type", "reasoning"},
          {"status", "completed"},
          {"summary", json::array()},
          {"content", {{{"type", "reasoning_text"}, {"text", text}}}},
          {"encrypted_content", nullptr}};
}

json call_item(const std::string& id, const ToolCall& call, const char* status, const NamespacedFunctions& namespaced) {
  json item = {{"id", id}, {"type", "function_call"}, {"status", status},
               {"call_id", call.id}, {"name", call.name}, {"arguments", call.arguments}};
  if (auto it = namespaced.find(call.name); it != namespaced.end()) {
    item["namespace"] = it->second.first;
    item["name"] = it->second.second;
  }
  return item;
}

class ResponsesFormat : public AnswerFormat {
 public:
  explicit ResponsesFormat(ResponsesShape shape) : shape_(std::move(shape)) {
    const std::string& id = shape_.id;
    id_suffix_ = id.rfind("resp_", 0) == 0 ? id.substr(5) : id;
  }

  void begin(size_t, Events& out) override {
    emit(out, "response.created", {{"response", object("in_progress", nullptr)}});
    emit(out, "response.in_progress", {{"response", object("in_progress", nullptr)}});
  }
  void reasoning(size_t, std::string_view text, Events& out) override {
    if (text.empty()) return;
    open(Item::kReasoning, out);
    open_text_ += text;
    emit(out, "response.reasoning_text.delta",
         {{"item_id", open_id_}, {"output_index", output_.size()}, {"content_index", 0}, {"delta", std::string(text)}});
  }
  void content(size_t, std::string_view text, std::span<const LogprobEntry> logprobs, Events& out) override {
    if (shape_.logprobs) add_logprobs(pending_logprobs_, logprobs);
    if (text.empty()) return;  // the logprobs of held text wait for the text
    open(Item::kMessage, out);
    open_text_ += text;
    json entries = std::exchange(pending_logprobs_, json::array());
    add_logprobs(open_logprobs_, entries);
    emit(out, "response.output_text.delta",
         {{"item_id", open_id_}, {"output_index", output_.size()}, {"content_index", 0},
          {"delta", std::string(text)}, {"logprobs", std::move(entries)}});
  }
  void end(size_t, const JobResult& r, std::span<const LogprobEntry> unsent, Events& out) override {
    incomplete_ = incomplete(r);
    if (!message_made_ && r.tool_calls.empty()) open(Item::kMessage, out);  // an answer holds a message
    if (open_ == Item::kMessage && shape_.logprobs) {
      add_logprobs(open_logprobs_, std::exchange(pending_logprobs_, json::array()));
      add_logprobs(open_logprobs_, unsent);
    }
    close_item(out);
    for (const ToolCall& call : r.tool_calls) {
      const size_t index = output_.size();
      const std::string id = item_id("fc", index);
      json done = call_item(id, call, "completed", shape_.namespaced);
      json added = done;
      added["status"] = "in_progress";
      added["arguments"] = "";
      emit(out, "response.output_item.added", {{"output_index", index}, {"item", std::move(added)}});
      // A call is whole only at the end: its arguments are one delta.
      emit(out, "response.function_call_arguments.delta",
           {{"item_id", id}, {"output_index", index}, {"delta", call.arguments}});
      emit(out, "response.function_call_arguments.done",
           {{"item_id", id}, {"output_index", index}, {"name", done["name"]}, {"arguments", call.arguments}});
      output_.push_back(std::move(done));
      emit(out, "response.output_item.done", {{"output_index", index}, {"item", output_.back()}});
    }
  }
  void close(const JobStats& usage, Events& out) override {
    json response = object(incomplete_ ? "incomplete" : "completed", usage_json(usage));
    keep(json_text(response));
    emit(out, incomplete_ ? "response.incomplete" : "response.completed", {{"response", std::move(response)}});
  }
  void failed(const NodeError& error, Events& out) override {
    json response = object("failed", nullptr);
    response["error"] = {{"code", error_code_name(error.code)}, {"message", error.message}};
    emit(out, "response.failed", {{"response", std::move(response)}});
  }

  std::string response(std::span<const JobResult> choices, const JobStats& usage) override {
    const JobResult& r = choices.front();
    incomplete_ = incomplete(r);
    if (r.reasoning && !r.reasoning->empty()) output_.push_back(reasoning_item(item_id("rs", output_.size()), *r.reasoning));
    if (!r.text.empty() || r.tool_calls.empty()) {
      json logprobs = json::array();
      if (shape_.logprobs) add_logprobs(logprobs, r.logprobs);
      output_.push_back(message_item(item_id("msg", output_.size()), r.text, std::move(logprobs)));
    }
    for (const ToolCall& call : r.tool_calls) output_.push_back(call_item(item_id("fc", output_.size()), call, "completed", shape_.namespaced));
    std::string text = json_text(object(incomplete_ ? "incomplete" : "completed", usage_json(usage)));
    keep(text);
    return text;
  }
  std::string error_body(const NodeError& error) override { return openai_error_for(error); }

 private:
  enum class Item { kNone, kReasoning, kMessage };

  // Output item ids: the response's, by position.
  std::string item_id(const char* prefix, size_t index) const {
    return std::string(prefix) + "_" + id_suffix_ + "_" + std::to_string(index);
  }

  json object(const char* status, json usage) const {
    json o = shape_.settings;
    o["id"] = shape_.id;
    o["object"] = "response";
    o["created_at"] = shape_.created;
    o["status"] = status;
    o["model"] = shape_.model;
    o["output"] = output_;
    o["error"] = nullptr;
    o["incomplete_details"] = std::string_view(status) == "incomplete" ? json{{"reason", "max_output_tokens"}} : json();
    o["usage"] = std::move(usage);
    if (std::string_view(status) == "completed") o["completed_at"] = static_cast<int64_t>(std::time(nullptr));
    return o;
  }

  json message_item(const std::string& id, const std::string& text, json logprobs) const {
    json part = {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
    if (shape_.logprobs) part["logprobs"] = std::move(logprobs);
    return {{"id", id}, {"type", "message"}, {"role", "assistant"},
            {"status", incomplete_ ? "incomplete" : "completed"}, {"content", {std::move(part)}}};
  }

  static void add_logprobs(json& to, std::span<const LogprobEntry> entries) {
    if (!entries.empty()) add_logprobs(to, logprobs_content(entries));
  }
  static void add_logprobs(json& to, const json& entries) {
    for (const json& e : entries) to.push_back(e);
  }

  // An event whose data is `fields` with its type and sequence_number.
  void emit(Events& out, const char* type, json fields) {
    fields["type"] = type;
    fields["sequence_number"] = sequence_++;
    out.push_back({type, json_text(fields)});
  }

  // Opens an item of `kind` at the end of the output, closing the one open.
  void open(Item kind, Events& out) {
    if (open_ == kind) return;
    close_item(out);
    open_ = kind;
    open_text_.clear();
    open_logprobs_ = json::array();
    const size_t index = output_.size();
    json item, part;
    if (kind == Item::kReasoning) {
      open_id_ = item_id("rs", index);
      item = reasoning_item(open_id_, "");
      part = item["content"][0];
    } else {
      open_id_ = item_id("msg", index);
      message_made_ = true;
      item = message_item(open_id_, "", json::array());
      part = item["content"][0];
    }
    item["status"] = "in_progress";
    item["content"] = json::array();
    emit(out, "response.output_item.added", {{"output_index", index}, {"item", std::move(item)}});
    emit(out, "response.content_part.added",
         {{"item_id", open_id_}, {"output_index", index}, {"content_index", 0}, {"part", std::move(part)}});
  }

  void close_item(Events& out) {
    if (open_ == Item::kNone) return;
    const size_t index = output_.size();
    json item;
    if (open_ == Item::kReasoning) {
      emit(out, "response.reasoning_text.done",
           {{"item_id", open_id_}, {"output_index", index}, {"content_index", 0}, {"text", open_text_}});
      item = reasoning_item(open_id_, open_text_);
    } else {
      emit(out, "response.output_text.done",
           {{"item_id", open_id_}, {"output_index", index}, {"content_index", 0}, {"text", open_text_},
            {"logprobs", open_logprobs_}});
      item = message_item(open_id_, open_text_, open_logprobs_);
    }
    emit(out, "response.content_part.done",
         {{"item_id", open_id_}, {"output_index", index}, {"content_index", 0}, {"part", item["content"][0]}});
    emit(out, "response.output_item.done", {{"output_index", index}, {"item", item}});
    output_.push_back(std::move(item));
    open_ = Item::kNone;
  }

  void keep(std::string object) {
    if (!shape_.store) return;
    shape_.store->keep(shape_.id, {std::move(shape_.conversation), output_, std::move(object)});
  }

  ResponsesShape shape_;
  std::string id_suffix_;
  uint64_t sequence_ = 0;
  json output_ = json::array();  // the items done
  bool incomplete_ = false;      // the answer hit max_output_tokens or the context
  bool message_made_ = false;
  // The item being streamed.
  Item open_ = Item::kNone;
  std::string open_id_, open_text_;
  json open_logprobs_ = json::array();
  json pending_logprobs_ = json::array();  // of tokens whose text is not out yet
};

}  // namespace

Outcome<ResponsesRequest> parse_responses_request(std::string_view body, const ResponseStore& store,
                                                  const RequestLimits& limits) {
  auto parsed = parse_request_object(body, limits);
  if (!parsed.ok()) return parsed.error();
  const json& j = *parsed;
  if (auto e = refuse_unsupported(j)) return *e;
  ResponsesRequest out;
  if (const json* s = given(j, "store")) {
    if (!s->is_boolean()) return bad("store must be true or false");
    out.store = s->get<bool>();
  }
  ordered chat = ordered::object();
  if (auto e = copy_sampling(j, chat)) return *e;
  ChatMessages messages(limits);
  if (const json* instructions = given(j, "instructions")) {
    if (!instructions->is_string()) return bad("instructions must be a string");
    messages.system(instructions->get<std::string>());
  }
  if (auto e = read_conversation(j, store, messages, out.conversation)) return *e;
  chat["messages"] = messages.take();
  if (const json* tools = given(j, "tools")) {
    if (!tools->is_array()) return bad("tools must be an array");
    chat["tools"] = ordered::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (string_at((*tools)[i], "type") == "namespace") {
        if (auto e = add_namespace_tools((*tools)[i], at, chat["tools"], out.namespaced)) return *e;
        continue;
      }
      auto tool = chat_tool((*tools)[i], at);
      if (!tool.ok()) return tool.error();
      chat["tools"].push_back(std::move(*tool));
    }
  }
  if (const json* choice = given(j, "tool_choice")) {
    auto converted = chat_tool_choice(*choice);
    if (!converted.ok()) return converted.error();
    chat["tool_choice"] = std::move(*converted);
  }
  if (const json* text = given(j, "text"))
    if (auto e = set_text_format(*text, chat)) return *e;
  if (const json* reasoning = given(j, "reasoning"))
    if (auto e = set_reasoning(*reasoning, chat)) return *e;
  if (auto e = set_logprobs(j, chat)) return *e;
  // Read as it is, not dumped and parsed again; the text is for a peer.
  auto request = chat_request_of(json(chat), limits);
  if (!request.ok()) return bad(responses_names(request.error().message));
  out.settings = settings_of(j, *request, out.store);
  out.chat_body = chat.dump();
  out.chat = std::move(*request);
  return out;
}

std::unique_ptr<AnswerFormat> responses_format(ResponsesShape shape) {
  return std::make_unique<ResponsesFormat>(std::move(shape));
}

StoredAnswer stored_response_request(ResponseStore& store, const std::string& id, bool remove) {
  auto kept = store.find(id);
  if (!kept)
    return {404, openai_error("no response \"" + id + "\" is kept on this node", "invalid_request_error", "not_found")};
  if (!remove) return {200, kept->object};
  store.forget(id);
  return {200, json_text({{"id", id}, {"object", "response"}, {"deleted", true}})};
}

}  // namespace revis::node
