// What `revis inspect` shows of a GGUF file, read without loading a model:
// the header, every metadata entry and the tensor table; long arrays
// (vocabularies) shortened, or with `json` all of it, arrays in full, as
// one JSON object.
//
// Thread-safety: a pure function of the file, but for its output on stdout.
#pragma once

#include <string>

#include "revis/status.h"

namespace revis {

// Prints the listing of the file at `path` on stdout; an error when it
// cannot be read as GGUF.
Status print_gguf_listing(const std::string& path, bool json);

}  // namespace revis
