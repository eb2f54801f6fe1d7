#include "chat/generic_tool_prompt.h"

#include <algorithm>

#include "chat/tool_call_json.h"
#include "chat/tool_call_markers.h"

namespace revis::node {
namespace {

using nlohmann::ordered_json;
using namespace toolcalls;

// Two texts as paragraphs of one message.
std::string joined(const std::string& first, const std::string& second) {
  if (first.empty()) return second;
  if (second.empty()) return first;
  return first + "\n\n" + second;
}

const ordered_json* field(const ordered_json& object, const char* name) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

// The function a tool result answers: the message's own `name`, or the
// name of the earlier call whose id it gives.
std::string result_name(std::span<const ChatMessage> messages, size_t index) {
  const ChatMessage& result = messages[index];
  if (const ordered_json* name = field(result.fields, "name"); name && name->is_string()) return *name;
  const ordered_json* id = field(result.fields, "tool_call_id");
  if (!id) return "";
  for (size_t i = index; i-- > 0;) {
    const ordered_json* calls = field(messages[i].fields, "tool_calls");
    if (messages[i].role != "assistant" || !calls || !calls->is_array()) continue;
    for (const ordered_json& call : *calls)
      if (const ordered_json* f = field(call, "function"); f && field(call, "id") && *field(call, "id") == *id)
        if (const ordered_json* name = field(*f, "name"); name && name->is_string()) return *name;
  }
  return "";
}

std::string results_text(const std::vector<std::pair<std::string, std::string>>& results) {
  std::string out(kGenericResultsOpen);
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& [name, content] = results[i];
    out += i ? ", {" : "{";
    if (!name.empty()) out.append("\"name\": ").append(json_text(name)).append(", ");
    out.append("\"content\": ").append(json_text(content)).append("}");
  }
  return out.append(kGenericListClose);
}

}  // namespace

std::string generic_calls_text(const ordered_json& tool_calls) {
  std::string out(kGenericCallsOpen);
  size_t n = 0;
  for (const ordered_json& call : tool_calls.is_array() ? tool_calls : ordered_json::array()) {
    const ordered_json* f = field(call, "function");
    const ordered_json* name = f ? field(*f, "name") : nullptr;
    if (!name) continue;
    const ordered_json* arguments = field(*f, "arguments");
    out += n++ ? ", {" : "{";
    out.append("\"name\": ").append(json_text(*name)).append(", \"arguments\": ");
    out.append(arguments && !arguments->is_null() ? json_text(*arguments) : "{}").append("}");
  }
  return out.append(kGenericListClose);
}

std::string generic_tools_section(const ordered_json& tools, const ToolRequest& request) {
  std::string out =
      "You can use tools. Each line below is one tool, as JSON: its name, what it does, and the JSON Schema of its "
      "arguments.\n";
  for (const ordered_json& tool : tools) {
    const ordered_json* f = field(tool, "function");
    if (!f || !field(*f, "name")) continue;
    ordered_json line = {{"name", *field(*f, "name")}};
    if (const ordered_json* d = field(*f, "description"); d && d->is_string()) line["description"] = *d;
    const ordered_json* p = field(*f, "parameters");
    line["parameters"] = p && !p->is_null() ? *p : ordered_json{{"type", "object"}};
    out.append(json_text(line)).append("\n");
  }
  const bool named = request.choice == ToolChoice::kNamed;
  std::string calls(kGenericCallsOpen);
  calls.append("{\"name\": \"").append(named ? request.name : "<tool name>");
  calls.append("\", \"arguments\": {<arguments>}}").append(kGenericListClose);
  const char* list = request.parallel ? "one call, or several to make at once" : "exactly one call";
  out += "\n";
  if (named) out.append("Call the tool ").append(request.name).append(": answer with this JSON object and nothing else");
  else if (request.choice == ToolChoice::kRequired) out.append("Call one of the tools: answer with this JSON object and nothing else");
  else out.append("Answer with one JSON object and nothing else. To call tools, write this one");
  out.append(", its list holding ").append(list).append(":\n").append(calls).append("\n");
  if (!request.forced()) out.append("To answer in words instead:\n").append(kGenericResponseOpen).append("\"<your answer>\"}\n");
  out.append("The results of calls come back in a user message, in the order of the calls: ").append(kGenericResultsOpen);
  out.append("{\"name\": \"<tool name>\", \"content\": \"<result>\"}").append(kGenericListClose);
  return out;
}

std::vector<ChatMessage> generic_tool_conversation(std::span<const ChatMessage> messages, const ordered_json* tools,
                                                   const ToolRequest& request, bool system_role) {
  std::vector<ChatMessage> out;
  std::vector<std::pair<std::string, std::string>> results;  // tool results not written yet: name, content
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      results.emplace_back(result_name(messages, i), m.content);
      continue;
    }
    ChatMessage message = m;
    if (!results.empty()) {
      if (m.role == "user") message.content = joined(results_text(results), m.content);
      else out.push_back({"user", results_text(results)});
      results.clear();
    }
    if (const ordered_json* calls = field(m.fields, "tool_calls"); m.role == "assistant" && calls) {
      message.content = joined(m.content, generic_calls_text(*calls));
      message.fields.erase("tool_calls");
    }
    out.push_back(std::move(message));
  }
  if (!results.empty()) out.push_back({"user", results_text(results)});

  if (!tools || !tools->is_array() || tools->empty()) return out;
  const std::string section = generic_tools_section(*tools, request);
  if (!out.empty() && out.front().role == "system") {
    out.front().content = joined(out.front().content, section);
    return out;
  }
  const auto user = std::find_if(out.begin(), out.end(), [](const ChatMessage& m) { return m.role == "user"; });
  if (system_role || user == out.end()) {
    out.insert(out.begin(), ChatMessage{"system", section});
  } else {
    user->content = joined(section, user->content);
  }
  return out;
}

}  // namespace revis::node
