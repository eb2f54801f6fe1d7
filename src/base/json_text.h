// JSON as revis writes it for others (the node's answers, the log): compact, and never throwing on text that is
// not valid UTF-8 (a model's piece can end mid-character; a client's string
// can be anything). Such bytes become U+FFFD instead.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace revis {

inline std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace revis
