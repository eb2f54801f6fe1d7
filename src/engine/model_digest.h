// The identity of a model file: one hash, computed by Engine::load from the
// mapping it already holds, that the node reports with every result (so a
// dispatcher can tell whether two nodes answered with the same weights) and
// the KV store records in every checkpoint (so rows computed by one model
// are never fed to another): ModelInfo::digest and ModelInfo::fingerprint.
//
// Hashing a whole multi-gigabyte file at every load would add tens of
// seconds, so large files get a sampled digest: SHA-256 over the file size,
// the first and last 4 MiB (header, metadata, tokenizer, first and last
// tensors) and 32 blocks of 256 KiB spread evenly in between. Files up to
// 32 MiB are hashed whole, and their digest is exactly the file's plain
// SHA-256 (what `sha256sum` prints).
//
//   "sha256:<64 hex>"          whole file
//   "sha256-sampled:<64 hex>"  sampled, as described above
//
// Files that differ only in bytes outside the samples get the same digest.
// Converters and quantizers change metadata, shapes or types, which moves
// the tensor data, and a fine-tune changes every tensor, so this does not
// happen in practice; a hand-edited weight would go unnoticed. Metadata past
// the first 4 MiB (the tail of a large vocabulary) may change unseen too;
// KV rows depend on the weights and the hyperparameters (which come first in
// the file), not on the vocabulary's texts.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace revis {

std::string model_digest(std::span<const uint8_t> file);

// The first 64 bits of the digest's hash (its first 16 hex digits, read as
// a big-endian number): the fingerprint KV checkpoints record. 0 for a
// string that is not a digest.
uint64_t model_fingerprint(std::string_view digest);

}  // namespace revis
