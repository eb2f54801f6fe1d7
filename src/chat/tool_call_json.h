// Reading the JSON in a model's tool calls, shared by the families'
// parsers: where an object ends in running text, arguments as the API
// returns them, and {"name": ..., "arguments": ...} objects.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"

namespace revis::node::toolcalls {

// `s` without the white space around it.
std::string_view trim(std::string_view s);

// A model's answer is read like a client's JSON (base/json_reader.h):
// linear in its length, and no deeper than kMaxToolCallDepth.
std::optional<nlohmann::ordered_json> parse_json(std::string_view text);

// Where the JSON object or array opening at s[0] ends (one past its closing
// bracket), or npos when it does not close.
size_t json_end(std::string_view s);

// `value` as JSON text. A model's raw text may hold any bytes: those that
// are not UTF-8 become U+FFFD instead of failing.
std::string json_text(const nlohmann::ordered_json& value);

// Arguments as the API returns them: a JSON object's text. A string that
// holds an object is taken as that object.
std::optional<std::string> arguments_text(const nlohmann::ordered_json& args);

// {"name": ..., "arguments" | "parameters": {...}}, without an id.
std::optional<ToolCall> call_from_object(const nlohmann::ordered_json& j);

// The whole text as the answer's content: what does not parse as calls.
ParsedAnswer as_content(std::string_view text);

}  // namespace revis::node::toolcalls
