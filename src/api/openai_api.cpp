#include "api/openai_api.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "base/json_reader.h"
#include "grammar/json_schema.h"

namespace revis::node {
namespace {

using nlohmann::json;


NodeError bad(std::string message) { return NodeError{ErrorCode::kBadRequest, std::move(message)}; }

// A message's content: a string, or an array of {"type":"text","text":...}
// parts (what newer clients send), concatenated.
Outcome<std::string> content_text(const json& content, const std::string& at) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return bad(at + " must be a string or an array of text parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      return bad(at + ": only {\"type\":\"text\",\"text\":...} parts are supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::optional<NodeError> parse_logit_bias(const json& j, OpenAiRequest& r);
std::optional<NodeError> parse_output_shape(const json& j, const RequestLimits& limits, OpenAiRequest& r);

// The sampling, length and output-shape fields both endpoints share.
std::optional<NodeError> parse_common(const json& j, const RequestLimits& limits, OpenAiRequest& r) {
  if (auto it = j.find("model"); it != j.end()) {
    if (!it->is_string()) return bad("model must be a string");
    r.model = it->get<std::string>();
  }
  auto number = [&](const char* key, float lo, float hi, float& out) -> std::optional<NodeError> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_number()) return bad(std::string(key) + " must be a number");
    const double v = it->get<double>();
    if (!(v >= lo && v <= hi))
      return bad(std::string(key) + " " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]");
    out = static_cast<float>(v);
    return std::nullopt;
  };
  if (auto e = number("temperature", 0, 2, r.sampling.temperature)) return e;
  if (auto e = number("top_p", 0, 1, r.sampling.top_p)) return e;
  if (auto e = number("min_p", 0, 1, r.sampling.min_p)) return e;
  if (auto e = number("frequency_penalty", -2, 2, r.sampling.frequency_penalty)) return e;
  if (auto e = number("presence_penalty", -2, 2, r.sampling.presence_penalty)) return e;
  if (auto e = number("repeat_penalty", 0, 10, r.sampling.repeat_penalty)) return e;
  if (r.sampling.top_p == 0) r.sampling.top_p = 1e-6f;  // OpenAI allows 0: "only the top token"
  if (auto it = j.find("top_k"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) return bad("top_k must be a non-negative integer");
    r.sampling.top_k = static_cast<int32_t>(std::min<int64_t>(it->get<int64_t>(), 1 << 20));
  }
  // llama-server's extension, and Ollama's option: the penalties' window.
  if (auto it = j.find("repeat_last_n"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) return bad("repeat_last_n must be a non-negative integer");
    r.sampling.repeat_last_n = static_cast<int32_t>(std::min<int64_t>(it->get<int64_t>(), 1 << 20));
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() < 1) return bad(std::string(key) + " must be a positive integer");
    r.max_tokens = static_cast<int>(std::min<int64_t>(it->get<int64_t>(), 1 << 24));
  }
  if (auto it = j.find("seed"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) return bad("seed must be an integer");
    r.sampling.seed = it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
    r.seed_given = true;
  }
  if (auto it = j.find("stop"); it != j.end() && !it->is_null()) {
    if (it->is_string()) {
      r.stop.push_back(it->get<std::string>());
    } else if (it->is_array() && it->size() <= 16) {
      for (const json& s : *it) {
        if (!s.is_string()) return bad("stop must be a string or an array of strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      return bad("stop must be a string or an array of at most 16 strings");
    }
    std::erase_if(r.stop, [](const std::string& s) { return s.empty(); });
  }
  if (auto it = j.find("n"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > kMaxChoices)
      return bad("n must be an integer in [1, " + std::to_string(kMaxChoices) + "] (choices, run one after another)");
    r.n = it->get<int>();
  }
  if (auto it = j.find("stream"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("stream must be true or false");
    r.stream = it->get<bool>();
  }
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return bad("stream_options must be an object");
    if (auto u = it->find("include_usage"); u != it->end()) {
      if (!u->is_boolean()) return bad("stream_options.include_usage must be true or false");
      r.include_usage = u->get<bool>();
    }
  }
  if (auto e = parse_logit_bias(j, r)) return e;
  return parse_output_shape(j, limits, r);
}

// logit_bias: {"token id": bias in [-100, 100]}, as OpenAI takes it. Ids
// beyond the model's vocabulary are refused when the job runs.
std::optional<NodeError> parse_logit_bias(const json& j, OpenAiRequest& r) {
  auto it = j.find("logit_bias");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return bad("logit_bias must be an object of token ids to biases");
  if (it->size() > 1024) return bad("logit_bias has " + std::to_string(it->size()) + " entries (at most 1024)");
  for (const auto& [key, value] : it->items()) {
    const bool digits = !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) return bad("logit_bias key \"" + key + "\" is not a token id (a decimal integer)");
    if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100))
      return bad("logit_bias[\"" + key + "\"] must be a number in [-100, 100]");
    r.sampling.logit_bias.emplace_back(std::stoi(key), value.get<float>());
  }
  return std::nullopt;
}

std::optional<NodeError> compile_grammar(const std::string& gbnf, const std::string& field, const RequestLimits& limits,
                                         OpenAiRequest& r) {
  auto g = Grammar::parse(gbnf, "root", limits.grammar);
  if (!g.ok()) return bad(field + ": " + g.status().message());
  r.grammar = std::move(*g);
  return std::nullopt;
}

std::optional<NodeError> compile_schema(const json& schema, const std::string& field, const RequestLimits& limits,
                                        OpenAiRequest& r) {
  auto g = compile_json_schema(to_ordered_json(schema), limits.grammar);
  if (!g.ok()) return bad(field + ": " + g.status().message());
  r.grammar = std::move(*g);
  return std::nullopt;
}

// response_format (OpenAI) and grammar (llama.cpp): what the output must be.
std::optional<NodeError> parse_output_shape(const json& j, const RequestLimits& limits, OpenAiRequest& r) {
  auto format = j.find("response_format");
  const bool has_format = format != j.end() && !format->is_null();
  auto grammar = j.find("grammar");
  const bool has_grammar = grammar != j.end() && !grammar->is_null();
  if (has_grammar) {
    if (!grammar->is_string()) return bad("grammar must be a string (GBNF)");
    if (auto e = compile_grammar(grammar->get<std::string>(), "grammar", limits, r)) return e;
  }
  if (!has_format) return std::nullopt;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
    return bad("response_format must be an object with a string type (text, json_object or json_schema)");
  const std::string type = (*format)["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type != "json_object" && type != "json_schema")
    return bad("response_format.type \"" + type + "\" is not supported (text, json_object, json_schema)");
  if (has_grammar) return bad("grammar and response_format both set the output's shape; send one of them");
  if (type == "json_object") {
    // llama.cpp's extension: a schema may come along.
    if (auto schema = format->find("schema"); schema != format->end() && !schema->is_null())
      return compile_schema(*schema, "response_format.schema", limits, r);
    return compile_grammar(json_object_gbnf(), "response_format", limits, r);
  }
  auto spec = format->find("json_schema");
  if (spec == format->end() || !spec->is_object()) return bad("response_format.json_schema must be an object");
  if (auto name = spec->find("name"); name != spec->end() && !name->is_string())
    return bad("response_format.json_schema.name must be a string");
  if (auto strict = spec->find("strict"); strict != spec->end() && !strict->is_null() && !strict->is_boolean())
    return bad("response_format.json_schema.strict must be true or false");
  auto schema = spec->find("schema");
  if (schema == spec->end() || schema->is_null()) return bad("response_format.json_schema.schema is missing");
  return compile_schema(*schema, "response_format.json_schema.schema", limits, r);
}

// Fields that would change the answer and that revis does not do: refused,
// never dropped.
std::optional<NodeError> refuse_unsupported(const json& j, std::initializer_list<const char*> keys) {
  for (const char* key : keys)
    if (auto it = j.find(key); it != j.end() && !it->is_null())
      return bad(std::string(key) + " is not supported");
  return std::nullopt;
}

// The string at j[key], or "" when absent or not a string.
std::string string_or_empty(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A function name as OpenAI allows it: [A-Za-z0-9_-]{1,64}. Tool-call
// grammars write it as it is.
bool valid_function_name(const std::string& s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
         });
}

// tools, tool_choice, parallel_tool_calls. With tool_choice "none" the tools
// are not shown to the model.
std::optional<NodeError> parse_tools(const json& j, OpenAiRequest& r) {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  std::vector<std::string> names;
  if (auto it = j.find("tools"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return bad("tools must be an array");
    if (it->size() > 128) return bad("tools has " + std::to_string(it->size()) + " entries (at most 128)");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& tool = (*it)[i];
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (!tool.is_object() || string_or_empty(tool, "type") != "function")
        return bad(at + " must be {\"type\": \"function\", \"function\": {...}} (only function tools are supported)");
      auto f = tool.find("function");
      if (f == tool.end() || !f->is_object()) return bad(at + ".function must be an object");
      const std::string name = string_or_empty(*f, "name");
      if (!valid_function_name(name)) return bad(at + ".function.name must be 1 to 64 letters, digits, _ or -");
      if (std::find(names.begin(), names.end(), name) != names.end())
        return bad(at + ".function.name \"" + name + "\" is given twice");
      if (auto d = f->find("description"); d != f->end() && !d->is_null() && !d->is_string())
        return bad(at + ".function.description must be a string");
      if (auto p = f->find("parameters"); p != f->end() && !p->is_null()) {
        if (!p->is_object() || (p->contains("type") && (*p)["type"] != "object"))
          return bad(at + ".function.parameters must be a JSON Schema of type object");
        // A schema revis cannot enforce would make a required call a lie.
        if (auto g = json_schema_to_gbnf(to_ordered_json(*p)); !g.ok())
          return bad(at + ".function.parameters: " + g.status().message());
      }
      names.push_back(name);
      tools.push_back(to_ordered_json(tool));
    }
  }
  ToolRequest& use = r.tool_use;
  if (auto it = j.find("tool_choice"); it != j.end() && !it->is_null()) {
    const json* function = nullptr;
    if (it->is_object())
      if (auto f = it->find("function"); f != it->end()) function = &*f;
    if (*it == "none") {
      use.choice = ToolChoice::kNone;
    } else if (*it == "auto") {
      use.choice = ToolChoice::kAuto;
    } else if (*it == "required") {
      use.choice = ToolChoice::kRequired;
    } else if (function && string_or_empty(*it, "type") == "function" && function->is_object() &&
               !string_or_empty(*function, "name").empty()) {
      use.choice = ToolChoice::kNamed;
      use.name = string_or_empty(*function, "name");
      if (std::find(names.begin(), names.end(), use.name) == names.end())
        return bad("tool_choice names the function \"" + use.name + "\", which is not among the tools");
    } else {
      return bad("tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
                 "{\"name\": ...}}");
    }
    if (tools.empty() && use.forced()) return bad("tool_choice asks for a call, but no tools are given");
  }
  if (auto it = j.find("parallel_tool_calls"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("parallel_tool_calls must be true or false");
    use.parallel = it->get<bool>();
  }
  if (use.forced() && r.grammar)
    return bad("tool_choice asks for a call, and response_format or grammar for another shape; send one of them");
  if (!tools.empty() && use.choice != ToolChoice::kNone) r.chat_options.tools = std::move(tools);
  return std::nullopt;
}

// An assistant message's tool_calls as the template gets them: OpenAI's
// shape, each call's arguments (a JSON text) parsed into an object, as
// templates write them with tojson.
Outcome<nlohmann::ordered_json> message_tool_calls(const json& calls, const std::string& at, const RequestLimits& limits) {
  if (!calls.is_array()) return bad(at + " must be an array");
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const json& c = calls[k];
    const std::string where = at + "[" + std::to_string(k) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
        (c.contains("type") && c["type"] != "function"))
      return bad(where + " must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    const json& f = c["function"];
    if (string_or_empty(f, "name").empty()) return bad(where + ".function.name must be a non-empty string");
    nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
    if (auto a = f.find("arguments"); a != f.end() && !a->is_null()) {
      if (a->is_string()) {
        auto read = read_ordered_json(a->get_ref<const std::string&>(), limits.max_json_depth);
        if (!read.ok()) return bad(where + ".function.arguments: " + read.status().message());
        arguments = std::move(*read);
      } else {
        arguments = to_ordered_json(*a);
      }
      if (!arguments.is_object()) return bad(where + ".function.arguments must be a JSON object (as a string)");
    }
    out.push_back({{"id", string_or_empty(c, "id")},
                   {"type", "function"},
                   {"function", {{"name", string_or_empty(f, "name")}, {"arguments", std::move(arguments)}}}});
  }
  return out;
}

}  // namespace

Outcome<nlohmann::json> parse_request_object(std::string_view body, const RequestLimits& limits) {
  auto j = read_json(body, limits.max_json_depth);
  if (!j.ok()) return bad("the request body: " + j.status().message());
  if (!j->is_object()) return bad("the request body must be a JSON object");
  return std::move(*j);
}

Outcome<OpenAiRequest> parse_chat_request(std::string_view body, const RequestLimits& limits) {
  auto parsed = parse_request_object(body, limits);
  if (!parsed.ok()) return parsed.error();
  return chat_request_of(*parsed, limits);
}

Outcome<OpenAiRequest> chat_request_of(const json& j, const RequestLimits& limits) {
  OpenAiRequest r;
  r.chat = true;
  if (auto e = parse_common(j, limits, r)) return *e;
  auto it = j.find("messages");
  if (it == j.end() || !it->is_array() || it->empty()) return bad("messages must be a non-empty array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad(at + " must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return bad(at + ".role must be a string");
    std::string r_name = role->get<std::string>();
    if (r_name == "developer") r_name = "system";  // OpenAI's newer name for the system role
    if (r_name != "system" && r_name != "user" && r_name != "assistant" && r_name != "tool")
      return bad(at + ".role \"" + r_name + "\" is not supported (system, developer, user, assistant, tool)");
    ChatMessage message{r_name, ""};
    auto calls = m.find("tool_calls");
    const bool has_calls = r_name == "assistant" && calls != m.end() && !calls->is_null();
    if (has_calls) {
      auto parsed = message_tool_calls(*calls, at + ".tool_calls", limits);
      if (!parsed.ok()) return parsed.error();
      message.fields["tool_calls"] = std::move(*parsed);
    }
    auto content = m.find("content");
    if (content == m.end() && !has_calls) return bad(at + ".content is missing");
    if (content != m.end()) {
      auto text = content_text(*content, at + ".content");
      if (!text.ok()) return text.error();
      message.content = std::move(*text);
    }
    if (r_name == "tool") {
      const std::string id = string_or_empty(m, "tool_call_id");
      if (id.empty()) return bad(at + ".tool_call_id must be a non-empty string (the call this result answers)");
      message.fields["tool_call_id"] = id;
    }
    if (auto name = m.find("name"); name != m.end() && !name->is_null()) {
      if (!name->is_string()) return bad(at + ".name must be a string");
      message.fields["name"] = name->get<std::string>();
    }
    // An earlier answer's thinking, as llama-server takes it back: the
    // template decides whether the model sees it again.
    if (auto thinking = m.find("reasoning_content"); r_name == "assistant" && thinking != m.end() && !thinking->is_null()) {
      if (!thinking->is_string()) return bad(at + ".reasoning_content must be a string");
      message.fields["reasoning_content"] = thinking->get<std::string>();
    }
    r.messages.push_back(std::move(message));
  }
  if (Status s = chat_kwargs_from_request(j, r.chat_options); !s.ok()) return bad(s.message());
  if (auto e = parse_tools(j, r)) return *e;
  if (auto it = j.find("modalities"); it != j.end() && !it->is_null() && *it != json::array({"text"}))
    return bad("modalities other than [\"text\"] are not supported");
  if (auto e = refuse_unsupported(j, {"functions", "function_call", "audio", "web_search_options"})) return *e;
  if (auto it = j.find("logprobs"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("logprobs must be true or false");
    r.logprobs = it->get<bool>();
  }
  if (auto it = j.find("top_logprobs"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 20)
      return bad("top_logprobs must be an integer in [0, 20]");
    if (!r.logprobs) return bad("top_logprobs needs logprobs: true");
    r.top_logprobs = it->get<int>();
  }
  return r;
}

Outcome<OpenAiRequest> parse_completion_request(std::string_view body, const RequestLimits& limits) {
  auto parsed = parse_request_object(body, limits);
  if (!parsed.ok()) return parsed.error();
  return completion_request_of(*parsed, limits);
}

Outcome<OpenAiRequest> completion_request_of(const json& j, const RequestLimits& limits) {
  OpenAiRequest r;
  r.chat = false;
  r.max_tokens = 16;  // OpenAI's default for the legacy completions endpoint
  if (auto e = parse_common(j, limits, r)) return *e;
  auto it = j.find("prompt");
  if (it == j.end()) return bad("prompt is missing");
  if (it->is_string()) {
    r.prompt = it->get<std::string>();
  } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    r.prompt = (*it)[0].get<std::string>();
  } else {
    return bad("prompt must be a string (or an array of exactly one string)");
  }
  if (r.prompt.empty()) return bad("prompt is empty");
  if (auto e = j.find("echo"); e != j.end() && e->is_boolean() && e->get<bool>()) return bad("echo is not supported");
  if (auto it = j.find("suffix"); it != j.end() && !it->is_null() && *it != "") return bad("suffix is not supported");
  // best_of picks the n best of best_of runs; equal to n, it picks them all.
  if (auto it = j.find("best_of"); it != j.end() && !it->is_null() && *it != 1 && *it != r.n)
    return bad("best_of must be 1 or equal to n (revis returns every run it makes)");
  // The legacy endpoint's logprobs is how many alternatives to list per token.
  if (auto it = j.find("logprobs"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 20)
      return bad("logprobs must be an integer in [0, 20] (alternatives per token)");
    r.logprobs = true;
    r.top_logprobs = it->get<int>();
  }
  return r;
}

uint64_t choice_seed(uint64_t seed, size_t choice) {
  if (choice == 0) return seed;
  // splitmix64's finaliser: neighbouring choices get unrelated seeds.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * choice;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace revis::node
