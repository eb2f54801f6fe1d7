// A byte range of a text: where a rendered chat prompt holds client text
// (Engine::tokenize_template's literal spans). A plain value.
#pragma once

#include <cstddef>

namespace revis {

// The bytes [begin, end) of a text.
struct TextSpan {
  size_t begin = 0;
  size_t end = 0;
};

}  // namespace revis
