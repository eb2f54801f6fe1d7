// A checkpoint file: the token ids of a prompt prefix, the KV rows computed
// for them, (optionally) the logits after the last token, so that a
// resumed session can sample at once, and for a model with recurrent layers
// the recurrent state after the last token. docs/kvstore.md has the byte
// layout.
//
// The rows never pass through a buffer of the whole checkpoint: they are
// read from the file straight into the session's KV cache, and written from
// it, described as KvRuns (Session::kv_runs; a checkpoint's rows are its runs
// one after the other, each cut to its token count). Reading streams the file in
// large chunks on a reader thread, with the kernel asked to read ahead, while
// the calling thread checksums each chunk as it lands (XXH3, checksum.h); a
// caller gets the tokens only once the whole payload has been verified, so
// rows of a damaged file are never used (they are garbage in the cache,
// behind an empty history).
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
#include <span>
#include <string>
#include <vector>

#include "revis/engine.h"
#include "revis/status.h"

namespace revis::kvstore {

// Version 2: XXH3 checksums. Version 3: version 2 plus a recurrent state
// after the rows (a hybrid model's), its size in the header; written only
// for such models, so that earlier builds keep reading the others' files
// and refuse these by their version. Version 4: deepseek4's, whose runs
// after the heads' are its compact compressor rows (model/compressor_cache.h)
// and whose state after the rows is its compressors' tail. Version 1 (a
// checksum of revis's own) and version 2 files of deepseek4 (per-position
// compressor planes) are refused with a message that says so, not
// converted: a checkpoint is a cache; `revis kv gc` removes such files.
constexpr uint32_t kFormatVersion = 2;
constexpr uint32_t kRecurrentFormatVersion = 3;
constexpr uint32_t kCompressorFormatVersion = 4;
constexpr const char* kCheckpointSuffix = ".rkv";
constexpr size_t kCheckpointHeaderBytes = 128;

// Element types of the KV rows, numbered as GGUF numbers tensor types.
enum class KvType : uint32_t { kF16 = 1 };

// The KV shape a checkpoint was computed with; it must equal the model's.
// head_dim_v is 0 where the values are part of the key rows (DeepSeek's
// latent attention, src/model/kv_cache.h). state_bytes: bytes per position
// of the runs after the K/V heads' (ModelInfo::kv_state_bytes_per_token:
// deepseek4's compressed keys and resume copies), 0 for the others. n_layer
// counts the layers with K/V rows (ModelInfo::n_kv_layer). recurrent_bytes:
// the state stored once after the rows, float32 (ModelInfo::recurrent_state_bytes:
// a hybrid's recurrent state, deepseek4's compressor tail), 0 for the others.
struct KvShape {
  uint32_t n_layer = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
  KvType type = KvType::kF16;
  uint32_t state_bytes = 0;
  uint32_t recurrent_bytes = 0;
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
  uint64_t payload_bytes = 0;
  uint64_t payload_checksum = 0;
  std::string writer;             // the program that wrote it ("revis 0.1.0"), for humans
};

// What a checkpoint holds besides its rows.
struct CheckpointContents {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // n_vocab values, or empty
};

// Writes the header (payload size and checksum filled in from the data),
// the tokens, the logits, positions [0, tokens.size()) of every run and
// a hybrid's recurrent state after those tokens (header.shape.recurrent_bytes
// of it), atomically at `path`. `runs` and `state` are only read.
Status write_checkpoint(const std::string& path, CheckpointHeader& header, const CheckpointContents& contents,
                        std::span<const KvRun> runs, std::span<const float> state = {});

// Reads and checks only the header and the token ids (for the index).
struct CheckpointSummary {
  CheckpointHeader header;
  std::vector<int32_t> tokens;
  uint64_t file_bytes = 0;
};
Result<CheckpointSummary> read_checkpoint_summary(const std::string& path);

// Where the time of a read went (docs/kvstore.md, "What a resume costs").
struct ReadTimings {
  uint64_t bytes = 0;      // the whole file
  double open_ms = 0;      // open, header, size checks
  double read_ms = 0;      // the reader thread: from the first read to the last byte in memory
  double verify_ms = 0;    // checksumming, on the calling thread, overlapped with the reads
  double total_ms = 0;     // open to verified
};

// Reads a checkpoint written for `model` with `shape` straight into `runs`
// (positions past a run's `positions` are read and checksummed, then
// dropped) and its recurrent state into `state` (shape.recurrent_bytes of
// it). The rows and the state are trustworthy only when it returns
// contents; on an error, whatever they hold is garbage.
Result<CheckpointContents> read_checkpoint_into(const std::string& path, uint64_t model, const KvShape& shape,
                                                std::span<const KvRun> runs, std::span<float> state = {},
                                                ReadTimings* timings = nullptr);

// The file name a checkpoint of `tokens` for `model` gets: the same prefix
// always maps to the same name, so rewriting it replaces the old file.
std::string checkpoint_file_name(uint64_t model, std::span<const int32_t> tokens);

}  // namespace revis::kvstore
