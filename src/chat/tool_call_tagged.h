// Arguments the tagged families (XML function, GLM) write one per tag:
// strings as they are, other values as JSON. Which is which comes from the
// tool's parameters schema in the request.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace revis::node::toolcalls {

// Whether a tagged family writes this property's value as raw text: a
// string, or one of some strings.
bool is_text_property(const nlohmann::ordered_json& schema);

// The schema of the property `key` of the tool `name` in the request's
// tools (OpenAI's array), or null.
const nlohmann::ordered_json* property_schema(const nlohmann::ordered_json& tools, std::string_view name,
                                              const std::string& key);

// A tagged argument's value. The templates write strings as they are and
// other values as JSON: a property the tool declares as text stays text;
// any other value that parses as JSON (other than a string) is that value,
// and the rest is text.
nlohmann::ordered_json tagged_value(std::string_view text, const nlohmann::ordered_json* schema);

}  // namespace revis::node::toolcalls
