#include "kvstore/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kvstore/checksum.h"

namespace revis::kvstore {
namespace {

constexpr char kMagic[8] = {'R', 'V', 'K', 'V', 'C', 'K', 'P', 'T'};
constexpr size_t kHeaderBytes = 128;
constexpr size_t kWriterBytes = 32;
constexpr size_t kHeaderChecksumAt = kHeaderBytes - 8;
constexpr uint32_t kFlagHasLogits = 1, kFlagLogitsAllRows = 2;
// Bounds far above any real model; they keep a damaged header from asking
// for absurd allocations.
constexpr uint32_t kMaxTokens = 1u << 24, kMaxLayers = 1u << 12, kMaxHeads = 1u << 12, kMaxHeadDim = 1u << 16,
                   kMaxVocab = 1u << 24;

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t payload_bytes_for(const CheckpointHeader& h) {
  return uint64_t{h.n_tokens} * sizeof(int32_t) + (h.has_logits ? uint64_t{h.n_vocab} * sizeof(float) : 0) +
         uint64_t{h.n_tokens} * h.shape.bytes_per_token();
}

// The payload checksum: the sections hashed in file order, each result
// seeding the next.
uint64_t payload_checksum(const Checkpoint& c) {
  uint64_t h = checksum64(c.tokens.data(), c.tokens.size() * sizeof(int32_t));
  h = checksum64(c.logits.data(), c.logits.size() * sizeof(float), h);
  return checksum64(c.kv.data(), c.kv.size(), h);
}

std::array<uint8_t, kHeaderBytes> encode_header(const CheckpointHeader& h) {
  std::array<uint8_t, kHeaderBytes> b{};
  std::memcpy(b.data(), kMagic, sizeof kMagic);
  put32(&b[8], h.version);
  put32(&b[12], kHeaderBytes);
  put64(&b[16], h.model);
  put32(&b[24], static_cast<uint32_t>(h.shape.type));
  put32(&b[28], h.shape.n_layer);
  put32(&b[32], h.shape.n_head_kv);
  put32(&b[36], h.shape.head_dim_k);
  put32(&b[40], h.shape.head_dim_v);
  put32(&b[44], h.n_tokens);
  put32(&b[48], h.n_vocab);
  put32(&b[52], (h.has_logits ? kFlagHasLogits : 0) | (h.logits_all_rows ? kFlagLogitsAllRows : 0));
  put64(&b[56], h.payload_bytes);
  put64(&b[64], h.payload_checksum);
  std::memcpy(&b[72], h.writer.data(), std::min(h.writer.size(), kWriterBytes));
  put64(&b[kHeaderChecksumAt], checksum64(b.data(), kHeaderChecksumAt));
  return b;
}

Result<CheckpointHeader> decode_header(const uint8_t* b) {
  if (std::memcmp(b, kMagic, sizeof kMagic) != 0)
    return Status::error("not a revis KV checkpoint (magic is not RVKVCKPT)");
  CheckpointHeader h;
  h.version = get32(&b[8]);
  if (h.version != kFormatVersion)
    return Status::error("format version " + std::to_string(h.version) + ", this build reads version " +
                         std::to_string(kFormatVersion));
  if (get64(&b[kHeaderChecksumAt]) != checksum64(b, kHeaderChecksumAt))
    return Status::error("header checksum mismatch (the header is damaged)");
  if (get32(&b[12]) != kHeaderBytes)
    return Status::error("header size " + std::to_string(get32(&b[12])) + ", expected " + std::to_string(kHeaderBytes));
  h.model = get64(&b[16]);
  const uint32_t type = get32(&b[24]);
  if (type != static_cast<uint32_t>(KvType::kF16))
    return Status::error("KV element type " + std::to_string(type) + ", this build reads F16 (1)");
  h.shape.n_layer = get32(&b[28]);
  h.shape.n_head_kv = get32(&b[32]);
  h.shape.head_dim_k = get32(&b[36]);
  h.shape.head_dim_v = get32(&b[40]);
  h.n_tokens = get32(&b[44]);
  h.n_vocab = get32(&b[48]);
  const uint32_t flags = get32(&b[52]);
  h.has_logits = flags & kFlagHasLogits;
  h.logits_all_rows = flags & kFlagLogitsAllRows;
  h.payload_bytes = get64(&b[56]);
  h.payload_checksum = get64(&b[64]);
  const char* writer = reinterpret_cast<const char*>(&b[72]);
  h.writer.assign(writer, strnlen(writer, kWriterBytes));
  const KvShape& s = h.shape;
  if (h.n_tokens == 0 || h.n_tokens > kMaxTokens || s.n_layer == 0 || s.n_layer > kMaxLayers || s.n_head_kv == 0 ||
      s.n_head_kv > kMaxHeads || s.head_dim_k == 0 || s.head_dim_k > kMaxHeadDim || s.head_dim_v == 0 ||
      s.head_dim_v > kMaxHeadDim || (h.has_logits && (h.n_vocab == 0 || h.n_vocab > kMaxVocab)))
    return Status::error("implausible shape (tokens " + std::to_string(h.n_tokens) + ", layers " +
                         std::to_string(s.n_layer) + ", kv heads " + std::to_string(s.n_head_kv) + ", head dims " +
                         std::to_string(s.head_dim_k) + "/" + std::to_string(s.head_dim_v) + ", vocab " +
                         std::to_string(h.n_vocab) + ")");
  if (h.payload_bytes != payload_bytes_for(h))
    return Status::error("payload size " + std::to_string(h.payload_bytes) + " does not match the shape (expected " +
                         std::to_string(payload_bytes_for(h)) + ")");
  return h;
}

Status read_exact(int fd, uint64_t offset, void* out, size_t size) {
  uint8_t* p = static_cast<uint8_t*>(out);
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, p + done, size - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::error(std::strerror(errno));
    if (got == 0) return Status::error("unexpected end of file");
    done += static_cast<size_t>(got);
  }
  return {};
}

Status write_all(int fd, const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t put = ::write(fd, p, size);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return Status::error(std::strerror(errno));
    p += put;
    size -= static_cast<size_t>(put);
  }
  return {};
}

// An open checkpoint whose header has been checked against the file size.
struct OpenedFile {
  int fd = -1;
  CheckpointHeader header;
  uint64_t file_bytes = 0;
  ~OpenedFile() {
    if (fd >= 0) ::close(fd);
  }
};

Status open_checked(const std::string& path, OpenedFile& f) {
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return Status::error(path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return Status::error(path + ": " + std::strerror(errno));
  f.file_bytes = static_cast<uint64_t>(st.st_size);
  if (f.file_bytes < kHeaderBytes)
    return Status::error(path + ": truncated: " + std::to_string(f.file_bytes) + " bytes, shorter than the " +
                         std::to_string(kHeaderBytes) + "-byte header");
  uint8_t bytes[kHeaderBytes];
  if (Status s = read_exact(f.fd, 0, bytes, kHeaderBytes); !s.ok()) return s.with_context(path);
  auto header = decode_header(bytes);
  if (!header.ok()) return header.status().with_context(path);
  f.header = *header;
  const uint64_t expected = kHeaderBytes + f.header.payload_bytes;
  if (f.file_bytes < expected)
    return Status::error(path + ": truncated: the header promises " + std::to_string(expected) + " bytes, the file has " +
                         std::to_string(f.file_bytes));
  if (f.file_bytes > expected)
    return Status::error(path + ": " + std::to_string(f.file_bytes - expected) + " trailing bytes after the payload");
  return {};
}

std::atomic<uint64_t> temp_counter{0};

}  // namespace

uint64_t KvShape::bytes_per_token() const {
  return uint64_t{n_layer} * n_head_kv * (head_dim_k + head_dim_v) * sizeof(uint16_t);
}

std::string checkpoint_file_name(uint64_t model, const std::vector<int32_t>& tokens) {
  return hex64(model) + "-" + hex64(checksum64(tokens.data(), tokens.size() * sizeof(int32_t))) + "-" +
         std::to_string(tokens.size()) + kCheckpointSuffix;
}

Status write_checkpoint(const std::string& path, Checkpoint& c) {
  CheckpointHeader& h = c.header;
  h.version = kFormatVersion;
  h.n_tokens = static_cast<uint32_t>(c.tokens.size());
  h.has_logits = !c.logits.empty();
  if (h.has_logits) h.n_vocab = static_cast<uint32_t>(c.logits.size());
  if (c.tokens.empty()) return Status::error(path + ": a checkpoint needs at least one token");
  if (c.kv.size() != c.tokens.size() * h.shape.bytes_per_token())
    return Status::error(path + ": " + std::to_string(c.kv.size()) + " bytes of KV rows for " +
                         std::to_string(c.tokens.size()) + " tokens, expected " +
                         std::to_string(c.tokens.size() * h.shape.bytes_per_token()));
  h.payload_bytes = payload_bytes_for(h);
  h.payload_checksum = payload_checksum(c);
  const auto header = encode_header(h);

  // A name no other writer (thread or process) uses; the leading dot keeps
  // it out of directory scans, and `revis kv gc` removes leftovers.
  const std::filesystem::path final_path(path);
  std::string temp_name = ".";
  temp_name.append(final_path.filename().string()).append(".").append(std::to_string(::getpid()));
  temp_name.append(".").append(std::to_string(temp_counter++)).append(".part");
  const std::string temp = (final_path.parent_path() / temp_name).string();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error(temp + ": cannot create: " + std::strerror(errno));
  Status s = write_all(fd, header.data(), header.size());
  if (s.ok()) s = write_all(fd, c.tokens.data(), c.tokens.size() * sizeof(int32_t));
  if (s.ok()) s = write_all(fd, c.logits.data(), c.logits.size() * sizeof(float));
  if (s.ok()) s = write_all(fd, c.kv.data(), c.kv.size());
  if (s.ok() && ::fsync(fd) != 0) s = Status::error(std::string("fsync: ") + std::strerror(errno));
  if (::close(fd) != 0 && s.ok()) s = Status::error(std::string("close: ") + std::strerror(errno));
  if (s.ok() && ::rename(temp.c_str(), path.c_str()) != 0)
    s = Status::error(std::string("rename into place: ") + std::strerror(errno));
  if (!s.ok()) {
    ::unlink(temp.c_str());
    return s.with_context(path);
  }
  // The rename itself is durable only once the directory is synced.
  const std::string dir = final_path.parent_path().empty() ? "." : final_path.parent_path().string();
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return {};
}

Result<CheckpointSummary> read_checkpoint_summary(const std::string& path) {
  OpenedFile f;
  if (Status s = open_checked(path, f); !s.ok()) return s;
  CheckpointSummary summary;
  summary.header = f.header;
  summary.file_bytes = f.file_bytes;
  summary.tokens.resize(f.header.n_tokens);
  if (Status s = read_exact(f.fd, kHeaderBytes, summary.tokens.data(), summary.tokens.size() * sizeof(int32_t));
      !s.ok())
    return s.with_context(path);
  return summary;
}

Result<Checkpoint> read_checkpoint(const std::string& path, uint64_t model, const KvShape& shape) {
  OpenedFile f;
  if (Status s = open_checked(path, f); !s.ok()) return s;
  const CheckpointHeader& h = f.header;
  if (h.model != model)
    return Status::error(path + ": written for model " + hex64(h.model) + ", the loaded model is " + hex64(model));
  if (!(h.shape == shape))
    return Status::error(path + ": KV shape " + std::to_string(h.shape.n_layer) + " layers x " +
                         std::to_string(h.shape.n_head_kv) + " heads x " + std::to_string(h.shape.head_dim_k) + "/" +
                         std::to_string(h.shape.head_dim_v) + " does not match the model's " +
                         std::to_string(shape.n_layer) + " x " + std::to_string(shape.n_head_kv) + " x " +
                         std::to_string(shape.head_dim_k) + "/" + std::to_string(shape.head_dim_v));
  Checkpoint c;
  c.header = h;
  c.tokens.resize(h.n_tokens);
  c.logits.resize(h.has_logits ? h.n_vocab : 0);
  c.kv.resize(h.n_tokens * h.shape.bytes_per_token());
  uint64_t offset = kHeaderBytes;
  Status s = read_exact(f.fd, offset, c.tokens.data(), c.tokens.size() * sizeof(int32_t));
  offset += c.tokens.size() * sizeof(int32_t);
  if (s.ok()) s = read_exact(f.fd, offset, c.logits.data(), c.logits.size() * sizeof(float));
  offset += c.logits.size() * sizeof(float);
  if (s.ok()) s = read_exact(f.fd, offset, c.kv.data(), c.kv.size());
  if (!s.ok()) return s.with_context(path);
  if (payload_checksum(c) != h.payload_checksum)
    return Status::error(path + ": payload checksum mismatch (the file is damaged)");
  return c;
}

}  // namespace revis::kvstore
