// The reference logits of `revis perplexity --kl-divergence-base FILE`: the
// tokens a model was scored on and, for every scored position, its
// next-token log-probabilities, so that a quantized file can later be
// compared against them (--kl-divergence) without the reference model.
// Two layouts are read, told apart by their magic; revis writes its own.
//
// revis's layout (little-endian; docs/formats.md):
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
// llama.cpp's layout (what `llama-perplexity --kl-divergence-base` writes):
//   "_logits_", i32 n_ctx, i32 n_vocab, i32 n_chunks,
//   i32 tokens[n_chunks * n_ctx]   (the text's tokens, BOS before the
//   text but not put first in each chunk), then the same positions, each
//     f32 scale, f32 min, u16 q[n_vocab rounded up to even]
//   log p_j = min + scale * q_j; q = 0 stands for every log-probability
//   16 or more below the top's; the row's top is its first largest q. As
//   llama.cpp counts them, entries at or below log p = -16 weigh nothing
//   in a divergence (KldRow::weightless_at_or_below), and rows are not
//   renormalised.
//
// KldBaseWriter and KldBaseReader each own their open file; one thread at a
// time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
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

// One stored row, decoded: log_probs[j] = log p_j (revis's layout:
// normalised to sum 1).
struct KldRow {
  int32_t top = 0;
  std::vector<double> log_probs;
  // Entries with log p at or below this stand for "too small to have been
  // kept" and are left out of a divergence.
  double weightless_at_or_below = -std::numeric_limits<double>::infinity();
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
  // the file is not a complete one of either layout.
  static Result<std::unique_ptr<KldBaseReader>> open(const std::string& path);
  // The same over bytes held in memory (`name` is what errors call them).
  static Result<std::unique_ptr<KldBaseReader>> parse(std::vector<uint8_t> bytes, const std::string& name);
  ~KldBaseReader();
  const KldBaseHeader& header() const { return header_; }
  // The next row, in file order.
  Result<KldRow> next_row();

 private:
  enum class Layout { kRevis, kLlamaCpp };
  KldBaseReader(std::FILE* file, std::string path, std::vector<uint8_t> bytes);
  Status read_header(size_t file_size);
  // After the magic: the layout's sizes, checked against the file's size.
  Status read_revis_sizes(size_t file_size);
  Status read_llama_cpp_sizes(size_t file_size);
  // Fills the header's sizes; an error where one is out of range or the
  // file is not exactly as long as they make it.
  Status check_sizes(int64_t n_vocab, int64_t n_ctx, int64_t n_chunks, uint64_t fixed_bytes, uint64_t bytes_a_row,
                     size_t file_size);
  Status read_tokens();
  Result<KldRow> next_revis_row();
  Result<KldRow> next_llama_cpp_row();
  Status read(void* out, size_t n);
  Layout layout_ = Layout::kRevis;
  int64_t rows_read_ = 0;
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
