// One line per event on stderr, so that a process's log (a node's, the
// CLI's) reads the same whichever thread wrote it. Two formats: text ("2026-01-02T03:04:05.678Z
// info  message") for a terminal or journald, and JSON lines
// ({"ts":"...","level":"info","msg":"...", ...fields}) for log collectors.
// Lines below the configured level are not written.
//
// Thread-safety: set_log_options is called once at start-up, before other
// threads log; log_line is thread-safe and lines never interleave.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "revis/status.h"

namespace revis {

// level: "debug", "info", "warn" or "error" (the lowest written; default
// info); format: "text" (default) or "json". An error names the choices.
Status set_log_options(std::string_view level, std::string_view format);

// level: "debug", "info", "warn" or "error".
void log_line(const char* level, const std::string& message);
// A structured record (the access log's): in text, `text` is the message;
// in JSON, msg is `kind` and `fields` are members beside ts, level and msg.
void log_record(const char* level, const std::string& text, const char* kind, const nlohmann::json& fields);

}  // namespace revis
