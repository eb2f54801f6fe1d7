#include "kvstore/model_fingerprint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "gguf/gguf.h"
#include "kvstore/checksum.h"

namespace revis::kvstore {
namespace {

constexpr uint64_t kSampleBytes = 64 << 10;
constexpr int kSamples = 64;

// checksum64 of bytes [offset, offset + size) of fd, chained onto seed.
Result<uint64_t> hash_range(int fd, uint64_t offset, uint64_t size, uint64_t seed) {
  std::vector<uint8_t> bytes(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, bytes.data() + done, size - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return Status::error(got < 0 ? std::strerror(errno) : "the file shrank while hashing");
    done += static_cast<size_t>(got);
  }
  return checksum64(bytes.data(), bytes.size(), seed);
}

}  // namespace

std::string hex64(uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) s[i] = digits[value & 15];
  return s;
}

Result<uint64_t> model_fingerprint(const std::string& gguf_path) {
  // The GGUF reader checks the file and finds where the tensor data starts.
  auto file = gguf::GgufFile::open(gguf_path);
  if (!file.ok()) return file.status();
  const uint64_t size = (*file)->file_size();
  const uint64_t data_offset = std::min((*file)->data_offset(), size);
  const int fd = ::open(gguf_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::error(gguf_path + ": " + std::strerror(errno));
  Result<uint64_t> h = hash_range(fd, 0, data_offset, checksum64(&size, sizeof size));
  const uint64_t data_bytes = size - data_offset;
  if (h.ok() && data_bytes <= kSamples * kSampleBytes) {
    h = hash_range(fd, data_offset, data_bytes, *h);
  } else {
    const uint64_t stride = (data_bytes - kSampleBytes) / (kSamples - 1);
    for (int i = 0; h.ok() && i < kSamples; ++i) h = hash_range(fd, data_offset + stride * i, kSampleBytes, *h);
  }
  ::close(fd);
  if (!h.ok()) return h.status().with_context(gguf_path + ": fingerprint");
  return h;
}

}  // namespace revis::kvstore
