// JSON that a client sent, read in time and memory linear in its size.
//
// nlohmann's own parse is linear for `json`, but not for `ordered_json`:
// its objects are vectors of pairs with a const key, so each insert looks
// the key up from the start, and growing the vector copies every member
// built so far, subtrees included (a schema nested 10,000 deep took over a
// minute). These readers build each object once, when it closes, and they
// refuse nesting past `max_depth` before any recursive code downstream
// (schema converters, template values, dump()) sees the value.
//
// Depth counts open containers: `1` is 0 deep, `[1]` 1, `{"a":[1]}` 2.
// A repeated key keeps its first position and its last value, as
// nlohmann's parse does. Errors name the byte offset or the path of the
// container that went too deep.
//
// Thread-safety: free functions on values.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "revis/status.h"

namespace revis {

Result<nlohmann::json> read_json(std::string_view text, int max_depth);
Result<nlohmann::ordered_json> read_ordered_json(std::string_view text, int max_depth);

// `value` with its objects in key order, built without re-parsing text
// (a value from read_json, whose depth is already bounded).
nlohmann::ordered_json to_ordered_json(const nlohmann::json& value);

// Appends `key` to an ordered object without looking for it first (an
// ordered object's own insert scans its members): the caller knows it is new.
void append_member(nlohmann::ordered_json& object, std::string key, nlohmann::ordered_json value);

}  // namespace revis
