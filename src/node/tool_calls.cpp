#include "node/tool_calls.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "node/reasoning_split.h"

namespace revis::node {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kSpace = " \t\n\r";
constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]", kMistralArgs = "[ARGS]", kMistralCallId = "[CALL_ID]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>", kDsCallBegin = "<｜tool▁call▁begin｜>",
                           kDsSep = "<｜tool▁sep｜>", kDsCallEnd = "<｜tool▁call▁end｜>",
                           kDsCallsEnd = "<｜tool▁calls▁end｜>";

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) + 1 - b);
}

std::optional<ordered_json> parse_json(std::string_view text) {
  ordered_json j = ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
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

}  // namespace

const char* tool_format_name(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes: return "hermes";
    case ToolFormat::kLlama3: return "llama3";
    case ToolFormat::kMistral: return "mistral";
    case ToolFormat::kDeepSeek: return "deepseek";
  }
  return "hermes";
}

std::optional<ToolFormat> tool_format(std::string_view source) {
  auto has = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
  if (has("tool▁call▁begin")) return ToolFormat::kDeepSeek;
  if (has("[TOOL_CALLS]")) return ToolFormat::kMistral;
  if (has(kHermesOpen)) return ToolFormat::kHermes;
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

ParsedAnswer parse_tool_calls(ToolFormat format, std::string_view text, std::string_view id_seed) {
  ParsedAnswer out;
  switch (format) {
    case ToolFormat::kHermes: out = parse_hermes(text); break;
    case ToolFormat::kLlama3: out = parse_llama3(text); break;
    case ToolFormat::kMistral: out = parse_mistral(text); break;
    case ToolFormat::kDeepSeek: out = parse_deepseek(text); break;
  }
  for (size_t i = 0; i < out.calls.size(); ++i) out.calls[i].id = tool_call_id(format, id_seed, i);
  return out;
}

std::vector<std::string_view> tool_markers(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes: return {kHermesOpen, kHermesClose};
    case ToolFormat::kLlama3: return {kPythonTag};
    case ToolFormat::kMistral: return {kMistralCalls, kMistralArgs, kMistralCallId};
    case ToolFormat::kDeepSeek: return {kDsCallsBegin, kDsCallBegin, kDsSep, kDsCallEnd, kDsCallsEnd};
  }
  return {};
}

// ---------------------------------------------------------------- streaming

std::string ToolCallSplitter::feed(std::string_view text) {
  pending_ += text;
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
  std::string_view opener = kHermesOpen;  // where a call begins
  if (format_ == ToolFormat::kMistral) opener = kMistralCalls;
  else if (format_ == ToolFormat::kDeepSeek) opener = kDsCallsBegin;
  const size_t at = pending_.find(opener);
  holding_ = at != std::string::npos;
  // pending_[keep, end) stays held: the call, or what may begin one.
  const size_t keep = holding_ ? at : pending_.size() - partial_tag_suffix(pending_, opener);
  // White space before the held part is held too: it belongs before a call.
  const size_t e = std::string_view(pending_).substr(0, keep).find_last_not_of(kSpace);
  const size_t emit = e == std::string::npos ? 0 : e + 1;
  std::string out = pending_.substr(0, emit);
  pending_.erase(0, emit);
  return out;
}

ParsedAnswer ToolCallSplitter::finish(std::string_view id_seed) {
  ParsedAnswer out;
  if (holding_) out = parse_tool_calls(format_, pending_, id_seed);
  if (out.calls.empty()) out.content = std::move(pending_);
  pending_.clear();
  return out;
}

// ---------------------------------------------------------------- grammar

Result<std::shared_ptr<const Grammar>> tool_call_grammar(ToolFormat format, const ordered_json& tools,
                                                        const ToolRequest& request, std::string_view preamble) {
  std::vector<NamedSchema> schemas;
  std::vector<std::string> names;
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
    schemas.push_back({"tool-args-" + std::to_string(schemas.size()), given ? *params : ordered_json{{"type", "object"}}});
  }
  if (schemas.empty()) return Status::error("tool_choice: no tool named \"" + request.name + "\"");
  auto args = json_schemas_to_gbnf(schemas);
  if (!args.ok()) return Status::error("tools: parameters of a tool to call: " + args.status().message());
  // Names are [A-Za-z0-9_-] (the API checks), so they need no escaping in JSON.
  std::string calls;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    const std::string a = " " + schemas[i].rule + " ";
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
    }
    calls += (i ? " | " : "") + ("(" + call + ")");
  }
  const std::string gbnf =
      *args + "revis-tool-call ::= " + (preamble.empty() ? "" : gbnf_literal(preamble) + " ") + "(" + calls + ")\n";
  return Grammar::parse(gbnf, "revis-tool-call");
}

}  // namespace revis::node
