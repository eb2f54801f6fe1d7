// A checkpoint file: the token ids of a prompt prefix, the KV rows computed
// for them, and (optionally) the logits after the last token, so that a
// resumed session can sample at once. docs/kvstore.md has the byte layout.
//
// Writing goes to a temporary file in the same directory, is fsynced, then
// renamed over the final name (and the directory fsynced), so a reader sees
// a whole file or none, and concurrent writers of the same prefix each
// install a complete file. Reading checks everything before trusting it:
// magic, version, a header checksum, the model fingerprint and KV shape
// against the loaded model, the file size against the header, and a
// checksum of the payload. Every rejection is a Status naming the file and
// what was expected.
//
// Thread-safety: free functions on distinct files; none shares state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "revis/status.h"

namespace revis::kvstore {

constexpr uint32_t kFormatVersion = 1;
constexpr const char* kCheckpointSuffix = ".rkv";

// Element types of the KV rows, numbered as GGUF numbers tensor types.
enum class KvType : uint32_t { kF16 = 1 };

// The KV shape a checkpoint was computed with; it must equal the model's.
struct KvShape {
  uint32_t n_layer = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
  KvType type = KvType::kF16;
  uint64_t bytes_per_token() const;
  bool operator==(const KvShape&) const = default;
};

struct CheckpointHeader {
  uint32_t version = kFormatVersion;
  uint64_t model = 0;  // ModelInfo::fingerprint of the model that computed the rows
  KvShape shape;
  uint32_t n_tokens = 0;
  uint32_t n_vocab = 0;           // length of the logits row, when there is one
  bool has_logits = false;
  bool logits_all_rows = false;   // see engine/session_pool.h: the logits mode
  uint64_t payload_bytes = 0;
  uint64_t payload_checksum = 0;
  std::string writer;             // the program that wrote it ("revis 0.1.0"), for humans
};

struct Checkpoint {
  CheckpointHeader header;
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // n_vocab values, or empty
  std::vector<uint8_t> kv;    // n_tokens * shape.bytes_per_token(), layout of Session::read_kv
};

// Fills in payload_bytes and payload_checksum from the contents and writes
// the file atomically at `path`.
Status write_checkpoint(const std::string& path, Checkpoint& checkpoint);

// Reads and checks only the header and the token ids (for the index).
struct CheckpointSummary {
  CheckpointHeader header;
  std::vector<int32_t> tokens;
  uint64_t file_bytes = 0;
};
Result<CheckpointSummary> read_checkpoint_summary(const std::string& path);

// Reads and checks a whole checkpoint written for `model` with `shape`.
Result<Checkpoint> read_checkpoint(const std::string& path, uint64_t model, const KvShape& shape);

// The file name a checkpoint of `tokens` for `model` gets: the same prefix
// always maps to the same name, so rewriting it replaces the old file.
std::string checkpoint_file_name(uint64_t model, const std::vector<int32_t>& tokens);

}  // namespace revis::kvstore
