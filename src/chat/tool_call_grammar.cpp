// tool_call_grammar() (declared in tool_calls.h): the alternatives of one
// call per tool, each in its family's syntax (ToolCallFamily::call_gbnf),
// over the arguments' rules from the tools' parameters schemas; a family
// whose whole answer is one JSON object (generic) puts them in that answer
// (ToolCallFamily::answer_gbnf).
#include <algorithm>

#include "chat/tool_call_family.h"
#include "chat/tool_call_tagged.h"
#include "chat/tool_calls.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using nlohmann::ordered_json;
using toolcalls::is_text_property;

// The GBNF of a property a tagged family writes as raw text
// (is_text_property): one of its strings, or text without '<' within the
// schema's minLength and maxLength.
std::string raw_text_rule(const ordered_json& schema) {
  std::vector<std::string> choices;
  if (auto e = schema.find("enum"); e != schema.end()) choices = e->get<std::vector<std::string>>();
  if (auto c = schema.find("const"); c != schema.end()) choices = {c->get<std::string>()};
  if (!choices.empty()) {
    std::string alternatives;
    for (const std::string& v : choices) alternatives += (alternatives.empty() ? "(" : " | ") + gbnf_literal(v);
    return alternatives + ")";
  }
  const auto length = [&](const char* key) {
    const auto it = schema.find(key);
    return it != schema.end() && it->is_number_unsigned() ? std::to_string(it->get<uint64_t>()) : std::string();
  };
  const std::string min = length("minLength"), max = length("maxLength");
  if (min.empty() && max.empty()) return "[^<]*";
  return "[^<]{" + (min.empty() ? "0" : min) + "," + max + "}";
}

// The GBNF of a tagged family's arguments to a tool with `parameters`: each
// property, in the schema's order (the required ones always, the others
// optionally), a string as raw text without '<' and any other value as
// the JSON of its schema, whose rule is added to `schemas`.
std::string tagged_arguments_gbnf(const ToolCallFamily& family, const ordered_json& parameters, size_t tool,
                                  std::vector<NamedSchema>& schemas) {
  const auto properties = parameters.find("properties");
  if (properties == parameters.end() || !properties->is_object()) return "";
  std::vector<std::string> required;
  if (auto r = parameters.find("required"); r != parameters.end() && r->is_array())
    for (const ordered_json& name : *r)
      if (name.is_string()) required.push_back(name.get<std::string>());
  std::string out;
  for (const auto& [key, schema] : properties->items()) {
    std::string value;
    if (is_text_property(schema)) {
      value = raw_text_rule(schema);
    } else {
      schemas.push_back({"tool-" + std::to_string(tool) + "-arg-" + std::to_string(schemas.size()), schema});
      value = "\"\\n\"? " + schemas.back().rule + " \"\\n\"?";
    }
    const std::string piece = family.argument_gbnf(key, value);
    const bool needed = std::find(required.begin(), required.end(), key) != required.end();
    out += (out.empty() ? "" : " ") + (needed ? piece : "(" + piece + ")?");
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const Grammar>> tool_call_grammar(ToolFormat format, const ordered_json& tools,
                                                        const ToolRequest& request, std::string_view preamble) {
  const ToolCallFamily& family = tool_call_family(format);
  const bool tagged = family.argument_gbnf != nullptr;
  std::vector<NamedSchema> schemas;
  std::vector<std::string> names, tagged_arguments;  // tagged_arguments: each tool's tagged_arguments_gbnf
  for (const ordered_json& tool : tools) {
    const auto function = tool.find("function");
    if (function == tool.end() || !function->is_object() || !function->contains("name") ||
        !(*function)["name"].is_string())
      return Status::error("tools: a tool without function.name");
    const std::string name = (*function)["name"].get<std::string>();
    if (request.choice == ToolChoice::kNamed && name != request.name) continue;
    names.push_back(name);
    const auto params = function->find("parameters");
    const bool given = params != function->end() && !params->is_null();
    const ordered_json parameters = given ? *params : ordered_json{{"type", "object"}};
    if (tagged) {
      tagged_arguments.push_back(tagged_arguments_gbnf(family, parameters, names.size() - 1, schemas));
    } else {
      schemas.push_back({"tool-args-" + std::to_string(schemas.size()), parameters});
    }
  }
  if (names.empty()) return Status::error("tool_choice: no tool named \"" + request.name + "\"");
  // A whole-answer family that lets the model answer in words needs the
  // rule of a JSON string for those words.
  const bool words = family.answer_gbnf && request.choice == ToolChoice::kAuto;
  if (words) schemas.push_back({"tool-answer-text", ordered_json{{"type", "string"}}});
  auto args = schemas.empty() ? Result<std::string>(std::string()) : json_schemas_to_gbnf(schemas);
  if (!args.ok()) return Status::error("tools: parameters of a tool to call: " + args.status().message());
  // Names are [A-Za-z0-9_-] (the API checks), so they need no escaping in JSON.
  std::string calls;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string arguments = tagged ? tagged_arguments[i] : " " + schemas[i].rule + " ";
    // Appended piece by piece: "(" + call makes GCC 12 warn falsely (-Wrestrict).
    calls += i ? " | (" : "(";
    calls += family.call_gbnf(names[i], arguments);
    calls += ')';
  }
  const std::string answer =
      family.answer_gbnf ? family.answer_gbnf(request, "revis-one-call", words ? "tool-answer-text" : "") : "revis-one-call";
  const std::string gbnf = *args + "revis-one-call ::= " + calls + "\n" + "revis-tool-call ::= " +
                           (preamble.empty() ? "" : gbnf_literal(preamble) + " ") + "(" + answer + ")\n";
  return Grammar::parse(gbnf, "revis-tool-call");
}

bool tool_call_grammar_applies(ToolFormat format, const ToolRequest& request) {
  return request.forced() || tool_call_family(format).answer_gbnf != nullptr;
}

}  // namespace revis::node
