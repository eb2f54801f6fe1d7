#include "chat/tool_calls.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/json_reader.h"
#include "chat/harmony.h"
#include "chat/reasoning_split.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kSpace = " \t\n\r";
constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]", kMistralArgs = "[ARGS]", kMistralCallId = "[CALL_ID]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kToolCallOpen = "<tool_call>", kSeedToolCallOpen = "<seed:tool_call>";
constexpr std::string_view kFunctionOpen = "<function=", kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=", kParameterClose = "</parameter>";
constexpr std::string_view kArgKeyOpen = "<arg_key>", kArgKeyClose = "</arg_key>", kArgValueOpen = "<arg_value>",
                           kArgValueClose = "</arg_value>";
constexpr std::string_view kKimiSectionBegin = "<|tool_calls_section_begin|>", kKimiCallBegin = "<|tool_call_begin|>",
                           kKimiArgsBegin = "<|tool_call_argument_begin|>", kKimiCallEnd = "<|tool_call_end|>",
                           kKimiSectionEnd = "<|tool_calls_section_end|>";
constexpr std::string_view kActionOpen = "<|START_ACTION|>", kActionClose = "<|END_ACTION|>";
constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>", kDsCallBegin = "<｜tool▁call▁begin｜>",
                           kDsSep = "<｜tool▁sep｜>", kDsCallEnd = "<｜tool▁call▁end｜>",
                           kDsCallsEnd = "<｜tool▁calls▁end｜>";

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) + 1 - b);
}

// A model's answer is read like a client's JSON (base/json_reader.h):
// linear in its length, and no deeper than what templates and dump() may
// walk.
std::optional<ordered_json> parse_json(std::string_view text) {
  auto j = read_ordered_json(text, kMaxToolCallDepth);
  if (!j.ok()) return std::nullopt;
  return std::move(*j);
}

// Where the JSON object or array opening at s[0] ends (one past its closing
// bracket), or npos when it does not close.
size_t json_end(std::string_view s) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// Arguments as the API returns them: a JSON object's text. A string that
// holds an object is taken as that object.
std::optional<std::string> arguments_text(const ordered_json& args) {
  if (args.is_object()) return args.dump();
  if (args.is_string())
    if (auto inner = parse_json(args.get<std::string>()); inner && inner->is_object()) return inner->dump();
  return std::nullopt;
}

// {"name": ..., "arguments" | "parameters": {...}}
std::optional<ToolCall> call_from_object(const ordered_json& j) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  std::optional<std::string> text = args == j.end() ? std::optional<std::string>("{}") : arguments_text(*args);
  if (!text) return std::nullopt;
  return ToolCall{"", name->get<std::string>(), *text};
}

ParsedAnswer as_content(std::string_view text) { return {std::string(trim(text)), {}}; }

ParsedAnswer parse_hermes(std::string_view text) {
  ParsedAnswer out;
  std::string content;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t body = open + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    const std::string_view inner = text.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body);
    auto j = parse_json(trim(inner));
    auto call = j ? call_from_object(*j) : std::nullopt;
    if (!call) break;  // not a call after all: the rest is content
    content += text.substr(pos, open - pos);
    out.calls.push_back(std::move(*call));
    pos = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
  }
  content += text.substr(pos);
  out.content = std::string(trim(content));
  return out;
}

ParsedAnswer parse_llama3(std::string_view text) {
  std::string_view body = trim(text);
  if (body.substr(0, kPythonTag.size()) == kPythonTag) body = trim(body.substr(kPythonTag.size()));
  if (body.empty() || body.front() != '{') return as_content(text);
  auto j = parse_json(body);
  auto call = j ? call_from_object(*j) : std::nullopt;
  if (!call) return as_content(text);
  return {"", {std::move(*call)}};
}

ParsedAnswer parse_mistral(std::string_view text) {
  const size_t at = text.find(kMistralCalls);
  if (at == std::string_view::npos) return as_content(text);
  ParsedAnswer out;
  std::string_view rest = trim(text.substr(at + kMistralCalls.size()));
  if (!rest.empty() && rest.front() == '[') {  // [{"name": ..., "arguments": ...}, ...]
    const size_t end = json_end(rest);
    if (end == std::string_view::npos) return as_content(text);
    auto j = parse_json(rest.substr(0, end));
    if (!j || !j->is_array()) return as_content(text);
    for (const ordered_json& item : *j) {
      auto call = call_from_object(item);
      if (!call) return as_content(text);
      out.calls.push_back(std::move(*call));
    }
    out.content = std::string(trim(std::string(text.substr(0, at)) + std::string(rest.substr(end))));
    return out;
  }
  // NAME[ARGS]{...}, repeated, each after its own [TOOL_CALLS] or not.
  while (!rest.empty()) {
    const size_t args = rest.find(kMistralArgs);
    if (args == std::string_view::npos) return as_content(text);
    std::string_view name = rest.substr(0, args);
    name = trim(name.substr(0, name.find(kMistralCallId)));  // Mistral Small 3.2 writes NAME[CALL_ID]ID[ARGS]
    std::string_view json_text = trim(rest.substr(args + kMistralArgs.size()));
    const size_t end = json_end(json_text);
    if (name.empty() || end == std::string_view::npos) return as_content(text);
    auto j = parse_json(json_text.substr(0, end));
    auto arguments = j ? arguments_text(*j) : std::nullopt;
    if (!arguments) return as_content(text);
    out.calls.push_back({"", std::string(name), *arguments});
    rest = trim(json_text.substr(end));
    if (rest.substr(0, kMistralCalls.size()) == kMistralCalls) rest = trim(rest.substr(kMistralCalls.size()));
  }
  out.content = std::string(trim(text.substr(0, at)));
  return out;
}

ParsedAnswer parse_deepseek(std::string_view text) {
  const size_t at = text.find(kDsCallsBegin);
  if (at == std::string_view::npos) return as_content(text);
  ParsedAnswer out;
  size_t pos = at + kDsCallsBegin.size();
  for (;;) {
    const size_t begin = text.find(kDsCallBegin, pos);
    if (begin == std::string_view::npos) break;
    const size_t sep = text.find(kDsSep, begin);
    if (sep == std::string_view::npos) return as_content(text);
    const size_t name_start = sep + kDsSep.size();
    const size_t newline = text.find('\n', name_start);
    if (newline == std::string_view::npos) return as_content(text);
    const std::string_view name = trim(text.substr(name_start, newline - name_start));
    const size_t brace = text.find_first_of("{", newline);
    if (name.empty() || brace == std::string_view::npos) return as_content(text);
    const size_t end = json_end(text.substr(brace));
    if (end == std::string_view::npos) return as_content(text);
    auto j = parse_json(text.substr(brace, end));
    auto arguments = j ? arguments_text(*j) : std::nullopt;
    if (!arguments) return as_content(text);
    out.calls.push_back({"", std::string(name), *arguments});
    const size_t call_end = text.find(kDsCallEnd, brace + end);
    pos = call_end == std::string_view::npos ? text.size() : call_end + kDsCallEnd.size();
  }
  if (out.calls.empty()) return as_content(text);
  out.content = std::string(trim(text.substr(0, at)));
  return out;
}

// Where the first of `openers` occurs in text (npos: none).
size_t first_of(std::string_view text, std::initializer_list<std::string_view> openers) {
  size_t first = std::string_view::npos;
  for (std::string_view o : openers) first = std::min(first, text.find(o));
  return first;
}

// Whether a family writing values in tags writes this property's value as
// raw text: a string, or one of some strings.
bool is_text_property(const ordered_json& schema) {
  if (!schema.is_object()) return false;
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array() && !e->empty())
    return std::all_of(e->begin(), e->end(), [](const ordered_json& v) { return v.is_string(); });
  if (auto c = schema.find("const"); c != schema.end()) return c->is_string();
  return schema.value("type", ordered_json()) == "string";
}

// The schema of the property `key` of the tool `name` in the request's
// tools (OpenAI's array), or null.
const ordered_json* property_schema(const ordered_json& tools, std::string_view name, const std::string& key) {
  if (!tools.is_array()) return nullptr;
  for (const ordered_json& tool : tools) {
    const ordered_json* f = tool.is_object() && tool.contains("function") ? &tool["function"] : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string() || (*f)["name"] != name) continue;
    const auto params = f->find("parameters");
    if (params == f->end() || !params->is_object()) return nullptr;
    const auto props = params->find("properties");
    if (props == params->end() || !props->is_object() || !props->contains(key)) return nullptr;
    return &(*props)[key];
  }
  return nullptr;
}

// A tagged argument's value. The templates write strings as they are and
// other values as JSON: a property the tool declares as text stays text;
// any other value that parses as JSON (other than a string) is that value,
// and the rest is text.
ordered_json tagged_value(std::string_view text, const ordered_json* schema) {
  if (schema && is_text_property(*schema)) return std::string(text);
  if (auto j = parse_json(trim(text)); j && !j->is_string()) return *j;
  return std::string(text);
}

// One newline on each side of a tagged value is layout, not value.
std::string_view strip_one_newline(std::string_view v) {
  if (v.starts_with('\n')) v.remove_prefix(1);
  if (v.ends_with('\n')) v.remove_suffix(1);
  return v;
}

// <tool_call> <function=NAME> (<parameter=KEY> VALUE </parameter>)* </function> </tool_call>,
// repeated (Qwen3.5 and Qwen3-Coder, Nemotron 3, StepFun; Seed-OSS wraps
// the same in <seed:tool_call>).
ParsedAnswer parse_xml_function(std::string_view text, const ordered_json& tools) {
  const size_t at = first_of(text, {kToolCallOpen, kSeedToolCallOpen});
  if (at == std::string_view::npos) return as_content(text);
  ParsedAnswer out;
  size_t pos = at;
  for (;;) {
    const size_t open = text.find(kFunctionOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t name_end = text.find('>', open);
    const size_t close = text.find(kFunctionClose, open);
    if (name_end == std::string_view::npos || close == std::string_view::npos || name_end > close) return as_content(text);
    const std::string_view name = trim(text.substr(open + kFunctionOpen.size(), name_end - open - kFunctionOpen.size()));
    if (name.empty()) return as_content(text);
    ordered_json args = ordered_json::object();
    const std::string_view body = text.substr(name_end + 1, close - name_end - 1);
    for (size_t p = body.find(kParameterOpen); p != std::string_view::npos; p = body.find(kParameterOpen, p)) {
      const size_t key_end = body.find('>', p);
      const size_t value_end = body.find(kParameterClose, p);
      if (key_end == std::string_view::npos || value_end == std::string_view::npos || key_end > value_end)
        return as_content(text);
      const std::string key(trim(body.substr(p + kParameterOpen.size(), key_end - p - kParameterOpen.size())));
      args[key] = tagged_value(strip_one_newline(body.substr(key_end + 1, value_end - key_end - 1)),
                               property_schema(tools, name, key));
      p = value_end + kParameterClose.size();
    }
    out.calls.push_back({"", std::string(name), args.dump()});
    pos = close + kFunctionClose.size();
  }
  if (out.calls.empty()) return as_content(text);
  out.content = std::string(trim(text.substr(0, at)));
  return out;
}

// <tool_call>NAME (<arg_key>KEY</arg_key> <arg_value>VALUE</arg_value>)* </tool_call>,
// repeated (GLM 4.5 and 4.6, Laguna).
ParsedAnswer parse_glm(std::string_view text, const ordered_json& tools) {
  ParsedAnswer out;
  std::string content;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t body = open + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    if (close == std::string_view::npos) return as_content(text);
    const std::string_view inner = text.substr(body, close - body);
    const size_t first_key = inner.find(kArgKeyOpen);
    const std::string_view name = trim(inner.substr(0, first_key));
    if (name.empty() || name.find_first_of(" \t\n<>{") != std::string_view::npos) return as_content(text);
    ordered_json args = ordered_json::object();
    for (size_t k = first_key; k != std::string_view::npos; k = inner.find(kArgKeyOpen, k)) {
      const size_t key_end = inner.find(kArgKeyClose, k);
      const size_t value_open = inner.find(kArgValueOpen, k);
      const size_t value_end = inner.find(kArgValueClose, k);
      if (key_end == std::string_view::npos || value_open == std::string_view::npos ||
          value_end == std::string_view::npos || !(key_end < value_open && value_open < value_end))
        return as_content(text);
      const std::string key(trim(inner.substr(k + kArgKeyOpen.size(), key_end - k - kArgKeyOpen.size())));
      const size_t v = value_open + kArgValueOpen.size();
      args[key] = tagged_value(inner.substr(v, value_end - v), property_schema(tools, name, key));
      k = value_end + kArgValueClose.size();
    }
    content += text.substr(pos, open - pos);
    out.calls.push_back({"", std::string(name), args.dump()});
    pos = close + kHermesClose.size();
  }
  if (out.calls.empty()) return as_content(text);
  content += text.substr(pos);
  out.content = std::string(trim(content));
  return out;
}

// <|tool_calls_section_begin|> (<|tool_call_begin|>functions.NAME:INDEX
// <|tool_call_argument_begin|>{...}<|tool_call_end|>)* <|tool_calls_section_end|>
// (Kimi K2). The call's id is the model's functions.NAME:INDEX, which its
// template writes back with the result.
ParsedAnswer parse_kimi(std::string_view text) {
  const size_t at = text.find(kKimiSectionBegin);
  if (at == std::string_view::npos) return as_content(text);
  ParsedAnswer out;
  size_t pos = at + kKimiSectionBegin.size();
  for (;;) {
    const size_t begin = text.find(kKimiCallBegin, pos);
    if (begin == std::string_view::npos) break;
    const size_t id_start = begin + kKimiCallBegin.size();
    const size_t args = text.find(kKimiArgsBegin, id_start);
    if (args == std::string_view::npos) return as_content(text);
    std::string_view name = trim(text.substr(id_start, args - id_start));
    if (name.starts_with("functions.")) name.remove_prefix(std::string_view("functions.").size());
    name = name.substr(0, name.rfind(':'));
    std::string_view json = trim(text.substr(args + kKimiArgsBegin.size()));
    const size_t end = json_end(json);
    if (name.empty() || end == std::string_view::npos) return as_content(text);
    auto j = parse_json(json.substr(0, end));
    auto arguments = j ? arguments_text(*j) : std::nullopt;
    if (!arguments) return as_content(text);
    out.calls.push_back({"", std::string(name), *arguments});
    const size_t call_end = text.find(kKimiCallEnd, args);
    pos = call_end == std::string_view::npos ? text.size() : call_end + kKimiCallEnd.size();
  }
  if (out.calls.empty()) return as_content(text);
  out.content = std::string(trim(text.substr(0, at)));
  return out;
}

// <|START_ACTION|>[{"tool_call_id": "0", "tool_name": NAME, "parameters": {...}}, ...]<|END_ACTION|>
// (Command R7B, Command A and the Cohere 2 family).
ParsedAnswer parse_command_r(std::string_view text) {
  const size_t at = text.find(kActionOpen);
  if (at == std::string_view::npos) return as_content(text);
  const std::string_view rest = trim(text.substr(at + kActionOpen.size()));
  const size_t end = rest.empty() || rest.front() != '[' ? std::string_view::npos : json_end(rest);
  if (end == std::string_view::npos) return as_content(text);
  auto j = parse_json(rest.substr(0, end));
  if (!j || !j->is_array()) return as_content(text);
  ParsedAnswer out;
  for (const ordered_json& item : *j) {
    if (!item.is_object() || !item.contains("tool_name") || !item["tool_name"].is_string()) return as_content(text);
    ordered_json call = {{"name", item["tool_name"]}};
    if (item.contains("parameters")) call["parameters"] = item["parameters"];
    auto parsed = call_from_object(call);
    if (!parsed) return as_content(text);
    out.calls.push_back(std::move(*parsed));
  }
  std::string_view after = rest.substr(end);
  if (after.starts_with(kActionClose)) after.remove_prefix(kActionClose.size());
  out.content = std::string(trim(std::string(text.substr(0, at)) + std::string(after)));
  return out;
}

// <function=NAME>{...}</function> (functionary v3.1), repeated.
ParsedAnswer parse_functionary(std::string_view text) {
  ParsedAnswer out;
  std::string content;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find(kFunctionOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t name_end = text.find('>', open);
    if (name_end == std::string_view::npos) return as_content(text);
    const std::string_view name = trim(text.substr(open + kFunctionOpen.size(), name_end - open - kFunctionOpen.size()));
    const std::string_view json = trim(text.substr(name_end + 1));
    const size_t end = json.empty() || json.front() != '{' ? std::string_view::npos : json_end(json);
    if (name.empty() || end == std::string_view::npos) return as_content(text);
    auto j = parse_json(json.substr(0, end));
    auto arguments = j ? arguments_text(*j) : std::nullopt;
    if (!arguments) return as_content(text);
    content += text.substr(pos, open - pos);
    out.calls.push_back({"", std::string(name), *arguments});
    std::string_view after = trim(json.substr(end));
    if (after.starts_with(kFunctionClose)) after.remove_prefix(kFunctionClose.size());
    pos = text.size() - after.size();
  }
  if (out.calls.empty()) return as_content(text);
  content += text.substr(pos);
  out.content = std::string(trim(content));
  return out;
}

// The answer's thinking is dropped: only its content and calls are asked for.
ParsedAnswer parse_harmony(std::string_view text) {
  HarmonySplitter harmony(true);
  ParsedAnswer out;
  std::string content = harmony.feed(text).content;
  content += harmony.finish("", out.calls).content;
  out.content = std::string(trim(content));
  return out;
}

}  // namespace

const char* tool_format_name(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes: return "hermes";
    case ToolFormat::kLlama3: return "llama3";
    case ToolFormat::kMistral: return "mistral";
    case ToolFormat::kDeepSeek: return "deepseek";
    case ToolFormat::kXmlFunction: return "xml-function";
    case ToolFormat::kGlm: return "glm";
    case ToolFormat::kKimi: return "kimi";
    case ToolFormat::kCommandR: return "command-r";
    case ToolFormat::kFunctionary: return "functionary";
    case ToolFormat::kHarmony: return "harmony";
  }
  return "hermes";
}

std::optional<ToolFormat> tool_format(std::string_view source) {
  auto has = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
  if (has("<|channel|>") && has("<|message|>")) return ToolFormat::kHarmony;
  if (has("tool▁call▁begin")) return ToolFormat::kDeepSeek;
  if (has("[TOOL_CALLS]")) return ToolFormat::kMistral;
  if (has(kKimiSectionBegin)) return ToolFormat::kKimi;
  if (has(kActionOpen)) return ToolFormat::kCommandR;
  // The XML families also write <tool_call>: they go before Hermes.
  if (has(kParameterOpen) && (has(kHermesOpen) || has(kSeedToolCallOpen))) return ToolFormat::kXmlFunction;
  if (has(kArgKeyOpen) && has(kHermesOpen)) return ToolFormat::kGlm;
  if (has(kHermesOpen)) return ToolFormat::kHermes;
  if (has(kFunctionOpen) && has(kFunctionClose)) return ToolFormat::kFunctionary;
  if (has("<|start_header_id|>") && has("tools")) return ToolFormat::kLlama3;
  return std::nullopt;
}

std::string tool_call_id(ToolFormat format, std::string_view seed, size_t index) {
  // FNV-1a over the seed and the index, written in base 62.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
  for (unsigned char c : seed) mix(c);
  for (size_t i = index + 1; i > 0; i /= 256) mix(static_cast<unsigned char>(i));
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string id;
  for (int k = 0; k < 9; ++k, h /= 62) id += kDigits[h % 62];
  return format == ToolFormat::kMistral ? id : "call_" + id;
}

ParsedAnswer parse_tool_calls(ToolFormat format, std::string_view text, std::string_view id_seed,
                              const ordered_json& tools) {
  ParsedAnswer out;
  switch (format) {
    case ToolFormat::kHermes: out = parse_hermes(text); break;
    case ToolFormat::kLlama3: out = parse_llama3(text); break;
    case ToolFormat::kMistral: out = parse_mistral(text); break;
    case ToolFormat::kDeepSeek: out = parse_deepseek(text); break;
    case ToolFormat::kXmlFunction: out = parse_xml_function(text, tools); break;
    case ToolFormat::kGlm: out = parse_glm(text, tools); break;
    case ToolFormat::kKimi: out = parse_kimi(text); break;
    case ToolFormat::kCommandR: out = parse_command_r(text); break;
    case ToolFormat::kFunctionary: out = parse_functionary(text); break;
    case ToolFormat::kHarmony: out = parse_harmony(text); break;
  }
  for (size_t i = 0; i < out.calls.size(); ++i)
    out.calls[i].id = format == ToolFormat::kKimi ? "functions." + out.calls[i].name + ":" + std::to_string(i)
                                                  : tool_call_id(format, id_seed, i);
  return out;
}

std::vector<std::string_view> tool_markers(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes: return {kHermesOpen, kHermesClose};
    case ToolFormat::kLlama3: return {kPythonTag};
    case ToolFormat::kMistral: return {kMistralCalls, kMistralArgs, kMistralCallId};
    case ToolFormat::kDeepSeek: return {kDsCallsBegin, kDsCallBegin, kDsSep, kDsCallEnd, kDsCallsEnd};
    case ToolFormat::kXmlFunction: return {kToolCallOpen, kHermesClose, kSeedToolCallOpen, "</seed:tool_call>"};
    case ToolFormat::kGlm: return {kHermesOpen, kHermesClose, kArgKeyOpen, kArgKeyClose, kArgValueOpen, kArgValueClose};
    case ToolFormat::kKimi: return {kKimiSectionBegin, kKimiCallBegin, kKimiArgsBegin, kKimiCallEnd, kKimiSectionEnd};
    case ToolFormat::kCommandR: return {kActionOpen, kActionClose};
    case ToolFormat::kFunctionary: return {kFunctionOpen, kFunctionClose};
    case ToolFormat::kHarmony: return harmony_markers();
  }
  return {};
}

// ---------------------------------------------------------------- streaming

namespace {

// The texts a call may begin with (for kLlama3, see feed()).
std::vector<std::string_view> call_openers(ToolFormat format) {
  switch (format) {
    case ToolFormat::kMistral: return {kMistralCalls};
    case ToolFormat::kDeepSeek: return {kDsCallsBegin};
    case ToolFormat::kXmlFunction: return {kToolCallOpen, kSeedToolCallOpen};
    case ToolFormat::kKimi: return {kKimiSectionBegin};
    case ToolFormat::kCommandR: return {kActionOpen};
    case ToolFormat::kFunctionary: return {kFunctionOpen};
    case ToolFormat::kHarmony: return {};  // held whole (ToolCallSplitter::feed)
    case ToolFormat::kHermes:
    case ToolFormat::kGlm:
    case ToolFormat::kLlama3: break;
  }
  return {kHermesOpen};
}

}  // namespace

std::string ToolCallSplitter::feed(std::string_view text) {
  pending_ += text;
  // A harmony call's header may begin anywhere before it: HarmonySplitter
  // streams harmony; here the answer is read whole.
  if (format_ == ToolFormat::kHarmony) holding_ = true;
  if (holding_) return {};
  if (format_ == ToolFormat::kLlama3) {
    // A call is the whole answer: held when the answer opens with `{` or
    // <|python_tag|>, all content otherwise.
    if (!started_) {
      const size_t b = pending_.find_first_not_of(kSpace);
      if (b == std::string::npos) return {};
      const std::string_view rest = std::string_view(pending_).substr(b);
      if (rest.front() == '{' || rest.starts_with(kPythonTag)) {
        holding_ = true;
        return {};
      }
      if (rest.size() < kPythonTag.size() && kPythonTag.starts_with(rest)) return {};
      started_ = true;
    }
    return std::exchange(pending_, std::string());
  }
  const std::vector<std::string_view> openers = call_openers(format_);
  size_t at = std::string::npos, partial = 0;
  for (std::string_view opener : openers) {
    at = std::min(at, pending_.find(opener));
    partial = std::max(partial, partial_tag_suffix(pending_, opener));
  }
  holding_ = at != std::string::npos;
  // pending_[keep, end) stays held: the call, or what may begin one.
  const size_t keep = holding_ ? at : pending_.size() - partial;
  // White space before the held part is held too: it belongs before a call.
  const size_t e = std::string_view(pending_).substr(0, keep).find_last_not_of(kSpace);
  const size_t emit = e == std::string::npos ? 0 : e + 1;
  std::string out = pending_.substr(0, emit);
  pending_.erase(0, emit);
  return out;
}

ParsedAnswer ToolCallSplitter::finish(std::string_view id_seed) {
  ParsedAnswer out;
  if (holding_) out = parse_tool_calls(format_, pending_, id_seed, tools_);
  if (out.calls.empty()) out.content = std::move(pending_);
  pending_.clear();
  return out;
}

// ---------------------------------------------------------------- grammar

namespace {

// The families that write each argument in tags of its own (XML function,
// GLM) rather than one JSON object.
bool tagged_arguments(ToolFormat format) { return format == ToolFormat::kXmlFunction || format == ToolFormat::kGlm; }

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
std::string tagged_arguments_gbnf(ToolFormat format, const ordered_json& parameters, size_t tool,
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
    const std::string piece =
        format == ToolFormat::kXmlFunction
            ? "\"\\n\"? " + gbnf_literal(std::string(kParameterOpen) + key + ">") + " " + value + " " +
                  gbnf_literal(kParameterClose)
            : "\"\\n\"? " + gbnf_literal(std::string(kArgKeyOpen) + key + std::string(kArgKeyClose)) + " \"\\n\"? " +
                  gbnf_literal(kArgValueOpen) + " " + value + " " + gbnf_literal(kArgValueClose);
    const bool needed = std::find(required.begin(), required.end(), key) != required.end();
    out += (out.empty() ? "" : " ") + (needed ? piece : "(" + piece + ")?");
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const Grammar>> tool_call_grammar(ToolFormat format, const ordered_json& tools,
                                                        const ToolRequest& request, std::string_view preamble) {
  std::vector<NamedSchema> schemas;
  std::vector<std::string> names, tagged;  // tagged: each tool's tagged_arguments_gbnf
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
    if (tagged_arguments(format)) {
      tagged.push_back(tagged_arguments_gbnf(format, parameters, names.size() - 1, schemas));
    } else {
      schemas.push_back({"tool-args-" + std::to_string(schemas.size()), parameters});
    }
  }
  if (names.empty()) return Status::error("tool_choice: no tool named \"" + request.name + "\"");
  auto args = schemas.empty() ? Result<std::string>(std::string()) : json_schemas_to_gbnf(schemas);
  if (!args.ok()) return Status::error("tools: parameters of a tool to call: " + args.status().message());
  // Names are [A-Za-z0-9_-] (the API checks), so they need no escaping in JSON.
  std::string calls;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    const std::string a = tagged_arguments(format) ? "" : " " + schemas[i].rule + " ";
    std::string call;
    switch (format) {
      case ToolFormat::kHermes:
        call = gbnf_literal("<tool_call>\n{\"name\": \"" + n + "\", \"arguments\": ") + a + gbnf_literal("}\n</tool_call>");
        break;
      case ToolFormat::kLlama3:
        call = gbnf_literal("{\"name\": \"" + n + "\", \"parameters\": ") + a + gbnf_literal("}");
        break;
      case ToolFormat::kMistral:
        call = gbnf_literal(std::string(kMistralCalls) + n) + " (" + gbnf_literal(kMistralCallId) +
               " [a-zA-Z0-9]{9})? " + gbnf_literal(kMistralArgs) + a;
        break;
      case ToolFormat::kDeepSeek:
        call = gbnf_literal(std::string(kDsCallsBegin) + std::string(kDsCallBegin) + "function" + std::string(kDsSep) + n +
                            "\n```json\n") +
               a + gbnf_literal("\n```" + std::string(kDsCallEnd) + std::string(kDsCallsEnd));
        break;
      case ToolFormat::kXmlFunction:
        call = gbnf_literal(std::string(kToolCallOpen) + "\n" + std::string(kFunctionOpen) + n + ">") + " " + tagged[i] +
               " \"\\n\"? " + gbnf_literal(std::string(kFunctionClose) + "\n" + std::string(kHermesClose));
        break;
      case ToolFormat::kGlm:
        call = gbnf_literal(std::string(kHermesOpen) + n) + " " + tagged[i] + " \"\\n\"? " + gbnf_literal(kHermesClose);
        break;
      case ToolFormat::kKimi:
        call = gbnf_literal(std::string(kKimiSectionBegin) + std::string(kKimiCallBegin) + "functions." + n + ":0" +
                            std::string(kKimiArgsBegin)) +
               a + gbnf_literal(std::string(kKimiCallEnd) + std::string(kKimiSectionEnd));
        break;
      case ToolFormat::kCommandR:
        call = gbnf_literal(std::string(kActionOpen) + "[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"" + n +
                            "\", \"parameters\": ") +
               a + gbnf_literal("}\n]" + std::string(kActionClose));
        break;
      case ToolFormat::kFunctionary:
        call = gbnf_literal(std::string(kFunctionOpen) + n + ">") + a + gbnf_literal(kFunctionClose);
        break;
      case ToolFormat::kHarmony:
        // Straight to the call, without an analysis message first.
        call = "\" \"? " + gbnf_literal("to=functions." + n + "<|channel|>commentary json<|message|>") + a;
        break;
    }
    calls += (i ? " | " : "") + ("(" + call + ")");
  }
  const std::string gbnf =
      *args + "revis-tool-call ::= " + (preamble.empty() ? "" : gbnf_literal(preamble) + " ") + "(" + calls + ")\n";
  return Grammar::parse(gbnf, "revis-tool-call");
}

}  // namespace revis::node
