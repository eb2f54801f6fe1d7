// The reference logits of `revis perplexity --kl-divergence-base FILE`: the
// tokens a model was scored on and, for every scored position, its
// next-token log-probabilities, so that a quantized file can later be
// compared against them (--kl-divergence) without the reference model.
//
// Format (little-endian; docs/formats.md):
//   "REVISKLD", u32 version (1), u32 n_vocab, u32 n_ctx, u32 n_chunks,
//   i32 tokens[n_chunks * n_ctx]   (each chunk as it ran, BOS included)
//   then per chunk, for each scored position i = n_ctx/2 .. n_ctx-2 (the
//   positions `revis perplexity` scores; kld_rows_per_chunk of them):
//     f32 low, f32 step, u32 top, u16 q[n_vocab]
//   log p_j = low + step * q_j. top is the most likely token (kept exactly:
//   q cannot break near-ties); low is the least log-probability kept, at
//   most kLogRange below the top's (lower ones read as low), and step puts
//   the top at q = 65535. A row takes 2 bytes a token instead of 4, and
//   its log-probabilities are off by at most step / 2 (about 2e-4 nats).
//
// KldBaseWriter and KldBaseReader each own their open file; one thread at a
// time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "revis/status.h"

namespace revis {

// Log-probabilities more than this below the most likely token's are stored
// as that floor: they weigh at most e^-30 in a divergence.
inline constexpr float kLogRange = 30.0f;

// Positions scored per chunk of n_ctx tokens.
inline int kld_rows_per_chunk(int n_ctx) { return n_ctx - 1 - n_ctx / 2; }

struct KldBaseHeader {
  int32_t n_vocab = 0;
  int32_t n_ctx = 0;
  int32_t n_chunks = 0;
  std::vector<int32_t> tokens;  // n_chunks * n_ctx
};

// One stored row, decoded: log_probs[j] = log p_j (normalised to sum 1).
struct KldRow {
  int32_t top = 0;
  std::vector<double> log_probs;
};

class KldBaseWriter {
 public:
  // Creates `path` and writes the header.
  static Result<std::unique_ptr<KldBaseWriter>> create(const std::string& path, const KldBaseHeader& header);
  ~KldBaseWriter();
  // Appends the row of one scored position, from its logits (n_vocab).
  Status add_row(std::span<const float> logits);
  // Checks that every row was added and flushes; the file is complete then.
  Status finish();

 private:
  KldBaseWriter(std::FILE* file, std::string path, KldBaseHeader header);
  std::FILE* file_;
  std::string path_;
  KldBaseHeader header_;
  int64_t rows_written_ = 0;
  std::vector<uint16_t> q_;
};

class KldBaseReader {
 public:
  // Opens `path` and reads its header; an error names what is wrong where
  // the file is not a complete one of this format.
  static Result<std::unique_ptr<KldBaseReader>> open(const std::string& path);
  // The same over bytes held in memory (`name` is what errors call them).
  static Result<std::unique_ptr<KldBaseReader>> parse(std::vector<uint8_t> bytes, const std::string& name);
  ~KldBaseReader();
  const KldBaseHeader& header() const { return header_; }
  // The next row, in file order.
  Result<KldRow> next_row();

 private:
  KldBaseReader(std::FILE* file, std::string path, std::vector<uint8_t> bytes);
  Status read_header(size_t file_size);
  Status read(void* out, size_t n);
  std::FILE* file_;
  std::string path_;
  std::vector<uint8_t> bytes_;  // the parse() form's input
  size_t offset_ = 0;
  KldBaseHeader header_;
  std::vector<uint16_t> q_;
};

// Log-softmax of one row of logits, in double.
std::vector<double> log_softmax(std::span<const float> logits);

}  // namespace revis
