// One line per event on stderr, with a UTC timestamp and a level, so that a
// node's log reads the same whichever thread wrote it.
#pragma once

#include <string>

#include "node/job.h"

namespace revis::node {

// level: "info", "warn" or "error". Thread-safe; lines never interleave.
void log_line(const char* level, const std::string& message);

// "ran ticket ID exec N from S ms to F ms (...)", for every job a node ran
// to the end: the cluster tests read these lines to check that no node ever
// ran two jobs at once.
void log_job_run(const std::string& id, const JobStats& stats);

}  // namespace revis::node
