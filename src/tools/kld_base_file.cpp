#include "tools/kld_base_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace revis {
namespace {

constexpr char kMagic[8] = {'R', 'E', 'V', 'I', 'S', 'K', 'L', 'D'};
constexpr uint32_t kVersion = 1;
constexpr size_t kFixedHeaderBytes = sizeof kMagic + 4 * sizeof(uint32_t);
constexpr size_t kRowHeaderBytes = 3 * sizeof(uint32_t);

uint64_t row_bytes(int64_t n_vocab) { return kRowHeaderBytes + sizeof(uint16_t) * static_cast<uint64_t>(n_vocab); }

constexpr char kLlamaCppMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr size_t kLlamaCppFixedHeaderBytes = sizeof kLlamaCppMagic + 3 * sizeof(int32_t);
// llama-perplexity counts no base entry at or below this log-probability.
constexpr double kLlamaCppWeightless = -16.0;

// A llama.cpp row holds the vocabulary rounded up to an even count.
int64_t llama_cpp_padded_vocab(int64_t n_vocab) { return 2 * ((n_vocab + 1) / 2); }
uint64_t llama_cpp_row_bytes(int64_t n_vocab) {
  return 2 * sizeof(float) + sizeof(uint16_t) * static_cast<uint64_t>(llama_cpp_padded_vocab(n_vocab));
}

}  // namespace

std::vector<double> log_softmax(std::span<const float> logits) {
  double largest = -std::numeric_limits<double>::infinity();
  for (float v : logits) largest = std::max(largest, static_cast<double>(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - largest);
  const double shift = largest + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t j = 0; j < logits.size(); ++j) out[j] = static_cast<double>(logits[j]) - shift;
  return out;
}

KldBaseWriter::KldBaseWriter(std::FILE* file, std::string path, KldBaseHeader header)
    : file_(file), path_(std::move(path)), header_(std::move(header)) {}

KldBaseWriter::~KldBaseWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

Result<std::unique_ptr<KldBaseWriter>> KldBaseWriter::create(const std::string& path, const KldBaseHeader& header) {
  if (header.n_vocab <= 0 || header.n_ctx < 3 || header.n_chunks <= 0 ||
      header.tokens.size() != static_cast<size_t>(header.n_chunks) * static_cast<size_t>(header.n_ctx))
    return Status::error(path + ": a KL-divergence base needs n_vocab > 0, n_ctx >= 3, n_chunks > 0 and n_chunks * "
                                "n_ctx tokens");
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return Status::error(path + ": cannot create: " + std::strerror(errno));
  std::unique_ptr<KldBaseWriter> writer(new KldBaseWriter(file, path, header));
  const uint32_t fields[4] = {kVersion, static_cast<uint32_t>(header.n_vocab), static_cast<uint32_t>(header.n_ctx),
                              static_cast<uint32_t>(header.n_chunks)};
  if (std::fwrite(kMagic, 1, sizeof kMagic, file) != sizeof kMagic ||
      std::fwrite(fields, sizeof fields, 1, file) != 1 ||
      std::fwrite(header.tokens.data(), sizeof(int32_t), header.tokens.size(), file) != header.tokens.size())
    return Status::error(path + ": write failed: " + std::strerror(errno));
  return writer;
}

Status KldBaseWriter::add_row(std::span<const float> logits) {
  if (logits.size() != static_cast<size_t>(header_.n_vocab))
    return Status::error(path_ + ": a row of " + std::to_string(logits.size()) + " logits, expected n_vocab " +
                         std::to_string(header_.n_vocab));
  const std::vector<double> lp = log_softmax(logits);
  const size_t top = static_cast<size_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
  const double lowest = *std::min_element(lp.begin(), lp.end());
  const double low = std::max(lowest, lp[top] - kLogRange);
  const double step = (lp[top] - low) / 65535.0;
  q_.resize(lp.size());
  for (size_t j = 0; j < lp.size(); ++j)
    q_[j] = step > 0 ? static_cast<uint16_t>(std::lround(std::clamp((lp[j] - low) / step, 0.0, 65535.0))) : 0;
  const float row_header[2] = {static_cast<float>(low), static_cast<float>(step)};
  const uint32_t top32 = static_cast<uint32_t>(top);
  if (std::fwrite(row_header, sizeof row_header, 1, file_) != 1 || std::fwrite(&top32, sizeof top32, 1, file_) != 1 ||
      std::fwrite(q_.data(), sizeof(uint16_t), q_.size(), file_) != q_.size())
    return Status::error(path_ + ": write failed: " + std::strerror(errno));
  ++rows_written_;
  return {};
}

Status KldBaseWriter::finish() {
  const int64_t expected = int64_t{header_.n_chunks} * kld_rows_per_chunk(header_.n_ctx);
  if (rows_written_ != expected)
    return Status::error(path_ + ": " + std::to_string(rows_written_) + " rows written, expected " +
                         std::to_string(expected));
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!closed) return Status::error(path_ + ": write failed: " + std::strerror(errno));
  return {};
}

KldBaseReader::KldBaseReader(std::FILE* file, std::string path, std::vector<uint8_t> bytes)
    : file_(file), path_(std::move(path)), bytes_(std::move(bytes)) {}

KldBaseReader::~KldBaseReader() {
  if (file_ != nullptr) std::fclose(file_);
}

Result<std::unique_ptr<KldBaseReader>> KldBaseReader::open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return Status::error(path + ": cannot open: " + std::strerror(errno));
  std::unique_ptr<KldBaseReader> reader(new KldBaseReader(file, path, {}));
  if (std::fseek(file, 0, SEEK_END) != 0) return Status::error(path + ": cannot seek: " + std::strerror(errno));
  const long size = std::ftell(file);
  std::rewind(file);
  if (size < 0) return Status::error(path + ": cannot tell its size");
  if (Status s = reader->read_header(static_cast<size_t>(size)); !s.ok()) return s;
  return reader;
}

Result<std::unique_ptr<KldBaseReader>> KldBaseReader::parse(std::vector<uint8_t> bytes, const std::string& name) {
  const size_t size = bytes.size();
  std::unique_ptr<KldBaseReader> reader(new KldBaseReader(nullptr, name, std::move(bytes)));
  if (Status s = reader->read_header(size); !s.ok()) return s;
  return reader;
}

Status KldBaseReader::read(void* out, size_t n) {
  if (file_ != nullptr) {
    if (std::fread(out, 1, n, file_) != n) return Status::error(path_ + ": truncated (read failed)");
    return {};
  }
  if (bytes_.size() - offset_ < n) return Status::error(path_ + ": truncated");
  std::memcpy(out, bytes_.data() + offset_, n);
  offset_ += n;
  return {};
}

Status KldBaseReader::read_header(size_t file_size) {
  char magic[sizeof kMagic];
  if (file_size < sizeof magic || !read(magic, sizeof magic).ok())
    return Status::error(path_ + ": not a KL-divergence base file (" + std::to_string(file_size) +
                         " bytes, shorter than a magic)");
  if (std::memcmp(magic, kMagic, sizeof kMagic) == 0) {
    layout_ = Layout::kRevis;
    if (Status s = read_revis_sizes(file_size); !s.ok()) return s;
  } else if (std::memcmp(magic, kLlamaCppMagic, sizeof kLlamaCppMagic) == 0) {
    layout_ = Layout::kLlamaCpp;
    if (Status s = read_llama_cpp_sizes(file_size); !s.ok()) return s;
  } else {
    return Status::error(path_ + ": not a KL-divergence base file (expected the magic \"REVISKLD\" of revis "
                                 "perplexity --kl-divergence-base FILE or \"_logits_\" of llama-perplexity's)");
  }
  return read_tokens();
}

Status KldBaseReader::read_revis_sizes(size_t file_size) {
  uint32_t fields[4];
  if (Status s = read(fields, sizeof fields); !s.ok()) return s;
  if (fields[0] != kVersion)
    return Status::error(path_ + ": version " + std::to_string(fields[0]) + ", expected " + std::to_string(kVersion));
  return check_sizes(fields[1], fields[2], fields[3], kFixedHeaderBytes, row_bytes(fields[1]), file_size);
}

Status KldBaseReader::read_llama_cpp_sizes(size_t file_size) {
  int32_t fields[3];  // n_ctx, n_vocab, n_chunks
  if (Status s = read(fields, sizeof fields); !s.ok()) return s;
  return check_sizes(fields[1], fields[0], fields[2], kLlamaCppFixedHeaderBytes, llama_cpp_row_bytes(fields[1]),
                     file_size);
}

Status KldBaseReader::check_sizes(int64_t n_vocab, int64_t n_ctx, int64_t n_chunks, uint64_t fixed_bytes,
                                  uint64_t bytes_a_row, size_t file_size) {
  const std::string where = path_ + (layout_ == Layout::kLlamaCpp ? " (llama-perplexity's layout)" : "");
  constexpr int64_t kLimit = int64_t{1} << 24;
  const auto in_range = [&](const char* field, int64_t value, int64_t least) -> Status {
    if (value >= least && value <= kLimit) return {};
    return Status::error(where + ": " + field + " " + std::to_string(value) + ", expected " + std::to_string(least) +
                         " .. 2^24");
  };
  if (Status s = in_range("n_vocab", n_vocab, 1); !s.ok()) return s;
  // n_ctx >= 3: a chunk with at least one scored position.
  if (Status s = in_range("n_ctx", n_ctx, 3); !s.ok()) return s;
  if (Status s = in_range("n_chunks", n_chunks, 1); !s.ok()) return s;
  header_.n_vocab = static_cast<int32_t>(n_vocab);
  header_.n_ctx = static_cast<int32_t>(n_ctx);
  header_.n_chunks = static_cast<int32_t>(n_chunks);
  // Tokens and rows each fit 64 bits (below 2^50 and 2^47); their bytes may not.
  const uint64_t n_tokens = static_cast<uint64_t>(n_ctx) * static_cast<uint64_t>(n_chunks);
  const uint64_t n_rows = static_cast<uint64_t>(n_chunks) * static_cast<uint64_t>(kld_rows_per_chunk(header_.n_ctx));
  uint64_t expected = 0;
  if (__builtin_mul_overflow(n_rows, bytes_a_row, &expected) ||
      __builtin_add_overflow(expected, fixed_bytes + sizeof(int32_t) * n_tokens, &expected))
    return Status::error(where + ": n_chunks " + std::to_string(n_chunks) + " of n_ctx " + std::to_string(n_ctx) +
                         " tokens over n_vocab " + std::to_string(n_vocab) +
                         " make more than 2^64 bytes (not this format)");
  if (file_size != expected)
    return Status::error(where + ": " + std::to_string(file_size) + " bytes, expected " + std::to_string(expected) +
                         " for n_chunks " + std::to_string(n_chunks) + " of n_ctx " + std::to_string(n_ctx) +
                         " tokens over n_vocab " + std::to_string(n_vocab) + " (truncated or not this format)");
  return {};
}

Status KldBaseReader::read_tokens() {
  header_.tokens.resize(static_cast<size_t>(header_.n_ctx) * static_cast<size_t>(header_.n_chunks));
  if (Status s = read(header_.tokens.data(), sizeof(int32_t) * header_.tokens.size()); !s.ok()) return s;
  for (size_t i = 0; i < header_.tokens.size(); ++i)
    if (header_.tokens[i] < 0 || header_.tokens[i] >= header_.n_vocab)
      return Status::error(path_ + ": token " + std::to_string(i) + " is " + std::to_string(header_.tokens[i]) +
                           ", expected 0 .. n_vocab - 1 = " + std::to_string(header_.n_vocab - 1));
  return {};
}

Result<KldRow> KldBaseReader::next_row() {
  auto row = layout_ == Layout::kLlamaCpp ? next_llama_cpp_row() : next_revis_row();
  if (row.ok()) ++rows_read_;
  return row;
}

Result<KldRow> KldBaseReader::next_revis_row() {
  float row_header[2];
  uint32_t top = 0;
  if (Status s = read(row_header, sizeof row_header); !s.ok()) return s;
  if (Status s = read(&top, sizeof top); !s.ok()) return s;
  q_.resize(static_cast<size_t>(header_.n_vocab));
  if (Status s = read(q_.data(), sizeof(uint16_t) * q_.size()); !s.ok()) return s;
  const float low = row_header[0], step = row_header[1];
  if (!std::isfinite(low) || !std::isfinite(step) || step < 0 || top >= static_cast<uint32_t>(header_.n_vocab))
    return Status::error(path_ + ": row " + std::to_string(rows_read_) + " has low " + std::to_string(low) +
                         ", step " + std::to_string(step) + ", top " + std::to_string(top) +
                         ": expected finite values, step >= 0, top < n_vocab");
  KldRow row;
  row.top = static_cast<int32_t>(top);
  row.log_probs.resize(q_.size());
  // Renormalised: the rounding of q leaves the sum of p a little off 1.
  double largest = -std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < q_.size(); ++j) largest = std::max(largest, double{low} + double{step} * q_[j]);
  double sum = 0;
  for (size_t j = 0; j < q_.size(); ++j) sum += std::exp(double{low} + double{step} * q_[j] - largest);
  const double shift = largest + std::log(sum);
  for (size_t j = 0; j < q_.size(); ++j)
    row.log_probs[j] = double{low} + double{step} * q_[j] - shift;
  return row;
}

Result<KldRow> KldBaseReader::next_llama_cpp_row() {
  float row_header[2];  // scale, min
  if (Status s = read(row_header, sizeof row_header); !s.ok()) return s;
  q_.resize(static_cast<size_t>(llama_cpp_padded_vocab(header_.n_vocab)));
  if (Status s = read(q_.data(), sizeof(uint16_t) * q_.size()); !s.ok()) return s;
  const double scale = row_header[0], min = row_header[1];
  // The top's log p is min + 65535 * scale = -log(sum of exp) <= 0, up to float rounding.
  if (!std::isfinite(scale) || !std::isfinite(min) || scale < 0 || min + 65535.0 * scale > 1e-3)
    return Status::error(path_ + " (llama-perplexity's layout): row " + std::to_string(rows_read_) + " has scale " +
                         std::to_string(scale) + ", min " + std::to_string(min) +
                         ": expected finite values, scale >= 0 and min + 65535 scale <= 0 (a log-probability)");
  KldRow row;
  row.log_probs.resize(static_cast<size_t>(header_.n_vocab));
  for (size_t j = 0; j < row.log_probs.size(); ++j) {
    row.log_probs[j] = min + scale * q_[j];
    if (q_[j] > q_[static_cast<size_t>(row.top)]) row.top = static_cast<int32_t>(j);
  }
  row.weightless_at_or_below = kLlamaCppWeightless;
  return row;
}

}  // namespace revis
