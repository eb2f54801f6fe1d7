#include "kvstore/checkpoint_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "kvstore/checksum.h"

namespace revis::kvstore {
namespace {

constexpr char kMagic[8] = {'R', 'V', 'K', 'V', 'C', 'K', 'P', 'T'};
constexpr size_t kHeaderBytes = kCheckpointHeaderBytes;
constexpr size_t kWriterBytes = 32;
constexpr size_t kHeaderChecksumAt = kHeaderBytes - 8;
// Flag 2 marked, in files of earlier versions, logits computed with every
// row's; rows no longer depend on that (engine.h's batch invariance), so
// it is ignored.
constexpr uint32_t kFlagHasLogits = 1;
// Bounds far above any real model; they keep a damaged header from asking
// for absurd allocations.
constexpr uint32_t kMaxTokens = 1u << 24, kMaxLayers = 1u << 12, kMaxHeads = 1u << 12, kMaxHeadDim = 1u << 16,
                   kMaxVocab = 1u << 24, kMaxStateBytes = 1u << 26, kMaxRecurrentBytes = 1u << 30;

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
         uint64_t{h.n_tokens} * h.shape.bytes_per_token() + h.shape.recurrent_bytes;
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
  put32(&b[52], h.has_logits ? kFlagHasLogits : 0);
  put64(&b[56], h.payload_bytes);
  put64(&b[64], h.payload_checksum);
  std::memcpy(&b[72], h.writer.data(), std::min(h.writer.size(), kWriterBytes));
  put32(&b[104], h.shape.state_bytes);
  put32(&b[108], h.shape.recurrent_bytes);
  put64(&b[kHeaderChecksumAt], checksum64(b.data(), kHeaderChecksumAt));
  return b;
}

Result<CheckpointHeader> decode_header(const uint8_t* b) {
  if (std::memcmp(b, kMagic, sizeof kMagic) != 0)
    return Status::error("not a revis KV checkpoint (magic is not RVKVCKPT)");
  CheckpointHeader h;
  h.version = get32(&b[8]);
  if (h.version == 1)
    return Status::error("format version 1, this build reads version " + std::to_string(kFormatVersion) +
                         " (version 1 used a checksum of its own, version 2 uses XXH3): an older revis wrote it; "
                         "`revis kv gc` removes it");
  if (h.version != kFormatVersion && h.version != kRecurrentFormatVersion && h.version != kCompressorFormatVersion)
    return Status::error("format version " + std::to_string(h.version) + ", this build reads versions " +
                         std::to_string(kFormatVersion) + " to " + std::to_string(kCompressorFormatVersion));
  if (get64(&b[kHeaderChecksumAt]) != checksum64(b, kHeaderChecksumAt))
    return Status::error("header checksum mismatch (the header is damaged)");
  if (h.version == kFormatVersion && get32(&b[104]) != 0)
    return Status::error("format version 2 with per-position state planes (deepseek4's compressor rows as an "
                         "earlier build kept them), this build keeps them compact in version " +
                         std::to_string(kCompressorFormatVersion) + ": an older revis wrote it; `revis kv gc` removes it");
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
  h.shape.state_bytes = get32(&b[104]);
  // Reserved (zero) before version 3.
  h.shape.recurrent_bytes = h.version >= kRecurrentFormatVersion ? get32(&b[108]) : 0;
  h.n_tokens = get32(&b[44]);
  h.n_vocab = get32(&b[48]);
  const uint32_t flags = get32(&b[52]);
  h.has_logits = flags & kFlagHasLogits;
  h.payload_bytes = get64(&b[56]);
  h.payload_checksum = get64(&b[64]);
  const char* writer = reinterpret_cast<const char*>(&b[72]);
  h.writer.assign(writer, strnlen(writer, kWriterBytes));
  const KvShape& s = h.shape;
  if (h.n_tokens == 0 || h.n_tokens > kMaxTokens || s.n_layer == 0 || s.n_layer > kMaxLayers || s.n_head_kv == 0 ||
      s.n_head_kv > kMaxHeads || s.head_dim_k == 0 || s.head_dim_k > kMaxHeadDim ||
      s.head_dim_v > kMaxHeadDim || s.state_bytes > kMaxStateBytes ||
      (h.version >= kRecurrentFormatVersion) != (s.recurrent_bytes > 0) ||
      (h.version == kCompressorFormatVersion) != (s.state_bytes > 0) || s.recurrent_bytes > kMaxRecurrentBytes ||
      s.recurrent_bytes % sizeof(float) != 0 || (h.has_logits && (h.n_vocab == 0 || h.n_vocab > kMaxVocab)))
    return Status::error("implausible shape (tokens " + std::to_string(h.n_tokens) + ", layers " +
                         std::to_string(s.n_layer) + ", kv heads " + std::to_string(s.n_head_kv) + ", head dims " +
                         std::to_string(s.head_dim_k) + "/" + std::to_string(s.head_dim_v) + ", state bytes " +
                         std::to_string(s.state_bytes) + ", recurrent state bytes " +
                         std::to_string(s.recurrent_bytes) + ", vocab " +
                         std::to_string(h.n_vocab) + ")");
  if (h.payload_bytes != payload_bytes_for(h))
    return Status::error("payload size " + std::to_string(h.payload_bytes) + " does not match the shape (expected " +
                         std::to_string(payload_bytes_for(h)) + ")");
  return h;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The payload in file order as pieces of memory: the token ids, the logits,
// then each run's first n positions (or, when reading a longer checkpoint
// than a run holds, a slice of a buffer for the rest).
struct Piece {
  uint8_t* data;
  size_t bytes;
};

// Reads and writes move this much of the file per system call: large enough
// that the call overhead vanishes and the device sees long sequential
// requests, small enough that a chunk is checksummed while it is still in
// the CPU's last-level cache.
constexpr size_t kChunkBytes = size_t{4} << 20;
// How far ahead of the current read the kernel is asked to read
// (POSIX_FADV_WILLNEED), so that several requests are in flight while a chunk
// is copied and checksummed.
constexpr uint64_t kReadAheadBytes = uint64_t{32} << 20;

// Calls fn(iovecs, count, payload offset, bytes) for consecutive chunks of
// about kChunkBytes covering the pieces, at most IOV_MAX vectors each; stops
// at the first error.
template <typename Fn>
Status for_each_chunk(std::span<const Piece> pieces, Fn fn) {
  std::vector<iovec> iov;
  uint64_t offset = 0, chunk_bytes = 0;
  auto flush = [&]() -> Status {
    if (iov.empty()) return {};
    Status s = fn(iov.data(), static_cast<int>(iov.size()), offset, chunk_bytes);
    offset += chunk_bytes;
    chunk_bytes = 0;
    iov.clear();
    return s;
  };
  for (const Piece& piece : pieces)
    for (size_t done = 0; done < piece.bytes;) {
      const size_t take = std::min<size_t>(piece.bytes - done, kChunkBytes - chunk_bytes);
      iov.push_back({piece.data + done, take});
      done += take;
      chunk_bytes += take;
      if (chunk_bytes == kChunkBytes || iov.size() == IOV_MAX)
        if (Status s = flush(); !s.ok()) return s;
    }
  return flush();
}

// preadv/pwritev of the whole vector at `offset`, resuming after short transfers.
Status transfer_all(bool write, int fd, iovec* iov, int count, uint64_t offset) {
  while (count > 0) {
    const ssize_t moved = write ? ::pwritev(fd, iov, count, static_cast<off_t>(offset))
                                : ::preadv(fd, iov, count, static_cast<off_t>(offset));
    if (moved < 0 && errno == EINTR) continue;
    if (moved < 0) return Status::error(std::strerror(errno));
    if (moved == 0) return Status::error(write ? "wrote nothing" : "unexpected end of file");
    offset += static_cast<uint64_t>(moved);
    for (size_t left = static_cast<size_t>(moved); left > 0;) {
      const size_t step = std::min(left, iov->iov_len);
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + step;
      iov->iov_len -= step;
      left -= step;
      if (iov->iov_len == 0) ++iov, --count;
    }
  }
  return {};
}

Status read_exact(int fd, uint64_t offset, void* out, size_t size) {
  iovec iov{out, size};
  return transfer_all(false, fd, &iov, 1, offset);
}

// Checksums the next `bytes` of the payload, walking the pieces from `at`.
struct PieceCursor {
  size_t piece = 0, offset = 0;
};
void checksum_pieces(std::span<const Piece> pieces, PieceCursor& at, uint64_t bytes, StreamingChecksum& sum) {
  while (bytes > 0) {
    const Piece& p = pieces[at.piece];
    const size_t take = static_cast<size_t>(std::min<uint64_t>(bytes, p.bytes - at.offset));
    sum.update(p.data + at.offset, take);
    bytes -= take;
    at.offset += take;
    if (at.offset == p.bytes) ++at.piece, at.offset = 0;
  }
}

// The pieces of a payload whose rows are the first n positions of `runs`,
// followed by the state; `overflow` (zeros when writing) stands for the
// positions a run has no room for and those past its last whole row.
std::vector<Piece> payload_pieces(CheckpointContents& c, std::span<const KvRun> runs, std::span<const float> state,
                                  std::vector<uint8_t>& overflow) {
  const size_t n = c.tokens.size();
  std::vector<Piece> pieces{{reinterpret_cast<uint8_t*>(c.tokens.data()), n * sizeof(int32_t)},
                            {reinterpret_cast<uint8_t*>(c.logits.data()), c.logits.size() * sizeof(float)}};
  auto fits = [n](const KvRun& r) { return std::min(n / r.positions_per_row * r.positions_per_row, r.positions); };
  size_t overflow_bytes = 0;
  for (const KvRun& r : runs) overflow_bytes += (n - fits(r)) * r.bytes_per_position;
  overflow.resize(overflow_bytes);
  size_t used = 0;
  for (const KvRun& r : runs) {
    const size_t fit = fits(r);
    pieces.push_back({r.data, fit * r.bytes_per_position});
    pieces.push_back({overflow.data() + used, (n - fit) * r.bytes_per_position});
    used += (n - fit) * r.bytes_per_position;
  }
  pieces.push_back({reinterpret_cast<uint8_t*>(const_cast<float*>(state.data())), state.size_bytes()});
  std::erase_if(pieces, [](const Piece& p) { return p.bytes == 0; });
  return pieces;
}

// The memory given for the rows and the recurrent state against the shape.
Status check_memory(std::span<const KvRun> runs, std::span<const float> state, const KvShape& shape) {
  uint64_t width = 0;
  for (const KvRun& r : runs) width += r.bytes_per_position;
  if (width != shape.bytes_per_token())
    return Status::error("rows of " + std::to_string(width) + " bytes per position, the KV shape has " +
                         std::to_string(shape.bytes_per_token()));
  if (state.size_bytes() != shape.recurrent_bytes)
    return Status::error("a recurrent state of " + std::to_string(state.size_bytes()) + " bytes, the KV shape has " +
                         std::to_string(shape.recurrent_bytes));
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
  return uint64_t{n_layer} * n_head_kv * (head_dim_k + head_dim_v) * sizeof(uint16_t) + state_bytes;
}

std::string checkpoint_file_name(uint64_t model, std::span<const int32_t> tokens) {
  return hex64(model) + "-" + hex64(checksum64(tokens.data(), tokens.size() * sizeof(int32_t))) + "-" +
         std::to_string(tokens.size()) + kCheckpointSuffix;
}

Status write_checkpoint(const std::string& path, CheckpointHeader& h, const CheckpointContents& c,
                        std::span<const KvRun> runs, std::span<const float> state) {
  h.version = h.shape.state_bytes > 0        ? kCompressorFormatVersion
              : h.shape.recurrent_bytes > 0 ? kRecurrentFormatVersion
                                            : kFormatVersion;
  h.n_tokens = static_cast<uint32_t>(c.tokens.size());
  h.has_logits = !c.logits.empty();
  if (h.has_logits) h.n_vocab = static_cast<uint32_t>(c.logits.size());
  if (c.tokens.empty()) return Status::error(path + ": a checkpoint needs at least one token");
  if (Status s = check_memory(runs, state, h.shape); !s.ok()) return s.with_context(path);
  for (const KvRun& r : runs)
    if (r.positions < c.tokens.size())
      return Status::error(path + ": a run of rows holds " + std::to_string(r.positions) + " positions, " +
                           std::to_string(c.tokens.size()) + " tokens to write");
  h.payload_bytes = payload_bytes_for(h);
  // The pieces are only read from here on.
  std::vector<uint8_t> zeros;
  const std::vector<Piece> pieces = payload_pieces(const_cast<CheckpointContents&>(c), runs, state, zeros);

  // A name no other writer (thread or process) uses; the leading dot keeps
  // it out of directory scans, and `revis kv gc` removes leftovers.
  const std::filesystem::path final_path(path);
  std::string temp_name = ".";
  temp_name.append(final_path.filename().string()).append(".").append(std::to_string(::getpid()));
  temp_name.append(".").append(std::to_string(temp_counter++)).append(".part");
  const std::string temp = (final_path.parent_path() / temp_name).string();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error(temp + ": cannot create: " + std::strerror(errno));
  // The payload first, checksummed chunk by chunk on its way out; then the
  // header, which carries the checksum.
  StreamingChecksum sum;
  PieceCursor cursor;
  Status s = for_each_chunk(pieces, [&](iovec* iov, int count, uint64_t offset, uint64_t bytes) {
    checksum_pieces(pieces, cursor, bytes, sum);
    return transfer_all(true, fd, iov, count, kHeaderBytes + offset);
  });
  h.payload_checksum = sum.digest();
  if (s.ok()) {
    auto header = encode_header(h);
    iovec iov{header.data(), header.size()};
    s = transfer_all(true, fd, &iov, 1, 0);
  }
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

Result<CheckpointContents> read_checkpoint_into(const std::string& path, uint64_t model, const KvShape& shape,
                                                std::span<const KvRun> runs, std::span<float> state,
                                                ReadTimings* timings) {
  const auto start = std::chrono::steady_clock::now();
  if (Status s = check_memory(runs, state, shape); !s.ok()) return s.with_context(path);
  OpenedFile f;
  if (Status s = open_checked(path, f); !s.ok()) return s;
  const CheckpointHeader& h = f.header;
  if (h.model != model)
    return Status::error(path + ": written for model " + hex64(h.model) + ", the loaded model is " + hex64(model));
  if (!(h.shape == shape))
    return Status::error(path + ": KV shape " + std::to_string(h.shape.n_layer) + " layers x " +
                         std::to_string(h.shape.n_head_kv) + " heads x " + std::to_string(h.shape.head_dim_k) + "/" +
                         std::to_string(h.shape.head_dim_v) + " + " + std::to_string(h.shape.state_bytes) +
                         " state bytes + " + std::to_string(h.shape.recurrent_bytes) +
                         " recurrent bytes does not match the model's " + std::to_string(shape.n_layer) + " x " +
                         std::to_string(shape.n_head_kv) + " x " + std::to_string(shape.head_dim_k) + "/" +
                         std::to_string(shape.head_dim_v) + " + " + std::to_string(shape.state_bytes) + " + " +
                         std::to_string(shape.recurrent_bytes));
  CheckpointContents c;
  c.tokens.resize(h.n_tokens);
  c.logits.resize(h.has_logits ? h.n_vocab : 0);
  std::vector<uint8_t> overflow;
  const std::vector<Piece> pieces = payload_pieces(c, runs, state, overflow);
  ReadTimings t;
  t.bytes = f.file_bytes;
  t.open_ms = ms_since(start);

  // The reader thread moves the file into the pieces chunk by chunk,
  // publishing how many payload bytes have landed; this thread checksums
  // them behind it. kFailed: the reader stopped on an error.
  constexpr uint64_t kFailed = ~uint64_t{0};
  ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::atomic<uint64_t> landed{0};
  Status read_status;
  std::thread reader([&] {
    const auto read_start = std::chrono::steady_clock::now();
    read_status = for_each_chunk(pieces, [&](iovec* iov, int count, uint64_t offset, uint64_t bytes) {
      const uint64_t at = kHeaderBytes + offset;
      ::posix_fadvise(f.fd, static_cast<off_t>(at + bytes), static_cast<off_t>(kReadAheadBytes), POSIX_FADV_WILLNEED);
      Status s = transfer_all(false, f.fd, iov, count, at);
      if (s.ok()) {
        landed.store(offset + bytes, std::memory_order_release);
        landed.notify_one();
      }
      return s;
    });
    t.read_ms = ms_since(read_start);
    if (!read_status.ok()) {
      landed.store(kFailed, std::memory_order_release);
      landed.notify_one();
    }
  });
  StreamingChecksum sum;
  PieceCursor cursor;
  for (uint64_t checked = 0; checked < h.payload_bytes;) {
    const uint64_t now = landed.load(std::memory_order_acquire);
    if (now == kFailed) break;
    if (now == checked) {
      landed.wait(checked, std::memory_order_acquire);
      continue;
    }
    const auto verify_start = std::chrono::steady_clock::now();
    checksum_pieces(pieces, cursor, now - checked, sum);
    t.verify_ms += ms_since(verify_start);
    checked = now;
  }
  reader.join();
  if (!read_status.ok()) return read_status.with_context(path);
  t.total_ms = ms_since(start);
  if (timings) *timings = t;
  if (sum.digest() != h.payload_checksum)
    return Status::error(path + ": payload checksum mismatch (the file is damaged)");
  return c;
}

}  // namespace revis::kvstore
