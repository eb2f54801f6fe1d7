// The model file digest a node reports with every result, so that a
// dispatcher can tell whether two nodes answered with the same weights.
//
// Hashing a whole multi-gigabyte file at every load would add tens of
// seconds, so large files get a sampled digest instead: SHA-256 over the
// file size, the first and last 4 MiB (header, metadata, tokenizer, first
// and last tensors) and 32 blocks of 256 KiB spread evenly in between. Files
// that differ only in bytes outside the samples get the same digest; for
// GGUF files produced by converters and quantizers that does not happen in
// practice, because any change of metadata or type moves the tensor data.
// Files up to 32 MiB are hashed whole, and their digest is exactly the
// file's plain SHA-256 (what `sha256sum` prints).
//
//   "sha256:<64 hex>"          whole file
//   "sha256-sampled:<64 hex>"  sampled, as described above
#pragma once

#include <string>

#include "revis/status.h"

namespace revis::node {

Result<std::string> model_file_digest(const std::string& path);

}  // namespace revis::node
