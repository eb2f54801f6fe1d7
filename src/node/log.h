// One line per event on stderr, with a UTC timestamp and a level, so that a
// node's log reads the same whichever thread wrote it.
#pragma once

#include <string>

namespace revis::node {

// level: "info", "warn" or "error". Thread-safe; lines never interleave.
void log_line(const char* level, const std::string& message);

}  // namespace revis::node
