// model_fingerprint: a 64-bit identity of a GGUF model file, recorded in
// every checkpoint so that KV rows computed by one model are never fed to
// another.
//
// Hashing a multi-gigabyte file at every load would cost seconds, so the
// fingerprint covers, with checksum64: the file size; every byte before the
// tensor data (the header, all metadata including the tokenizer, and the
// tensor table with names, shapes, types and offsets); and 64 samples of
// 64 KiB spread evenly over the tensor data (all of it when it is smaller).
// Two files that differ only in tensor bytes outside the samples get the same
// fingerprint. Converters and quantizers change metadata, shapes or
// offsets, and a fine-tune changes every tensor, so this does not happen in
// practice; a hand-edited weight would go unnoticed (docs/kvstore.md).
#pragma once

#include <cstdint>
#include <string>

#include "revis/status.h"

namespace revis::kvstore {

Result<uint64_t> model_fingerprint(const std::string& gguf_path);

// 16 lowercase hex digits, as file names and `revis kv ls` show it.
std::string hex64(uint64_t value);

}  // namespace revis::kvstore
