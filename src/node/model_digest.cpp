#include "node/model_digest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "node/sha256.h"

namespace revis::node {
namespace {

constexpr uint64_t kWholeFileLimit = 32ull << 20;
constexpr uint64_t kEdgeBytes = 4ull << 20;
constexpr uint64_t kSampleBytes = 256ull << 10;
constexpr int kSamples = 32;

// Feeds bytes [offset, offset + size) of fd into the hash.
Status hash_range(int fd, uint64_t offset, uint64_t size, Sha256& h, std::vector<uint8_t>& buf) {
  while (size > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(size, buf.size()));
    const ssize_t got = ::pread(fd, buf.data(), want, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return Status::error(got < 0 ? std::strerror(errno) : "file shrank while hashing");
    h.update(buf.data(), static_cast<size_t>(got));
    offset += static_cast<uint64_t>(got);
    size -= static_cast<uint64_t>(got);
  }
  return {};
}

}  // namespace

Result<std::string> model_file_digest(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::error(path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::error(path + ": " + std::strerror(err));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::vector<uint8_t> buf(1 << 20);
  Sha256 h;
  Status s;
  std::string scheme;
  if (size <= kWholeFileLimit) {
    scheme = "sha256:";
    s = hash_range(fd, 0, size, h, buf);
  } else {
    scheme = "sha256-sampled:";
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(size >> (8 * i));
    h.update(len, 8);
    s = hash_range(fd, 0, kEdgeBytes, h, buf);
    const uint64_t middle = size - 2 * kEdgeBytes;  // > 0 since size > 32 MiB
    for (int i = 0; s.ok() && i < kSamples; ++i) {
      const uint64_t offset = kEdgeBytes + (middle - kSampleBytes) / (kSamples - 1) * i;
      s = hash_range(fd, offset, kSampleBytes, h, buf);
    }
    if (s.ok()) s = hash_range(fd, size - kEdgeBytes, kEdgeBytes, h, buf);
  }
  ::close(fd);
  if (!s.ok()) return s.with_context(path);
  return scheme + h.finish_hex();
}

}  // namespace revis::node
