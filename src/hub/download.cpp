#include "hub/download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "hash/sha256.h"
#include "hub/http_get.h"
#include "hub/listing.h"

namespace revis::hub {
namespace {

constexpr int kStalledAttempts = 3;

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// The sha256 in an X-Linked-Etag ("\"<64 hex>\"", maybe W/-prefixed);
// empty for a git blob's sha1 (a file not in LFS).
std::string etag_sha256(const std::map<std::string, std::string>& headers) {
  const auto it = headers.find("x-linked-etag");
  if (it == headers.end()) return "";
  std::string v = it->second;
  if (v.rfind("W/", 0) == 0) v = v.substr(2);
  v.erase(std::remove(v.begin(), v.end(), '"'), v.end());
  return is_sha256_hex(v) ? lower(v) : "";
}

uint64_t free_bytes(const std::string& path) {
  struct statvfs fs {};
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (statvfs(dir.empty() ? "." : dir.c_str(), &fs) != 0) return UINT64_MAX;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

// `needed`: the bytes still to come; 0 when the server gave no size.
Status disk_full(const std::string& path, uint64_t have, uint64_t needed) {
  const std::string need = needed ? " needs " + std::to_string(needed) + " more bytes"
                                  : " filled the disk after " + std::to_string(have) + " bytes (the server gave no size)";
  return Status::error("disk full: " + path + need + ", " + std::to_string(free_bytes(path)) +
                       " are free on its file system (the partial download is kept: free some space and pull again to resume)");
}

// The partial file open for appending, and the hash of what it holds.
struct Partial {
  int fd = -1;
  uint64_t size = 0;
  Sha256 hash;
  ~Partial() {
    if (fd >= 0) ::close(fd);
  }
};

Status open_partial(const std::string& part, Partial& p) {
  p.fd = ::open(part.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (p.fd < 0) return Status::error(part + ": cannot open: " + std::strerror(errno));
  std::vector<char> buffer(1 << 20);
  for (;;) {
    const ssize_t n = ::pread(p.fd, buffer.data(), buffer.size(), static_cast<off_t>(p.size));
    if (n < 0) return Status::error(part + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;
    p.hash.update(buffer.data(), static_cast<size_t>(n));
    p.size += static_cast<uint64_t>(n);
  }
  return Status();
}

Status restart_partial(const std::string& part, Partial& p) {
  if (::ftruncate(p.fd, 0) != 0) return Status::error(part + ": cannot truncate: " + std::strerror(errno));
  p.size = 0;
  p.hash = Sha256();
  return Status();
}

// "bytes START-END/TOTAL": START and TOTAL (0 for "*").
bool parse_content_range(const std::string& text, uint64_t& start, uint64_t& total) {
  unsigned long long s = 0, e = 0, t = 0;
  if (std::sscanf(text.c_str(), "bytes %llu-%llu/%llu", &s, &e, &t) == 3) {
    start = s;
    total = t;
    return true;
  }
  if (std::sscanf(text.c_str(), "bytes %llu-%llu/*", &s, &e) == 2) {
    start = s;
    total = 0;
    return true;
  }
  return false;
}

uint64_t header_number(const std::map<std::string, std::string>& headers, const char* name) {
  const auto it = headers.find(name);
  return it == headers.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
}

// download_file once the part is open.
Result<DownloadInfo> fetch_into(const DownloadRequest& r, const std::string& part, Partial& p) {
  DownloadInfo info{.resumed_from = p.size};
  std::string expected = r.expected_sha256;
  uint64_t total = 0;
  for (int stalled = 0;;) {
    const uint64_t before = p.size;
    bool fatal = false;  // a disk error or a refused answer: resuming would not help
    GetOptions options{.bearer = r.bearer, .timeout_ms = r.timeout_ms};
    if (p.size > 0) options.headers.emplace_back("Range", "bytes=" + std::to_string(p.size) + "-");
    auto on_head = [&](const GetResult& head) -> Status {
      fatal = true;
      if (head.status == 206) {
        uint64_t start = 0;
        const auto range = head.headers.find("content-range");
        if (range == head.headers.end() || !parse_content_range(range->second, start, total) || start != p.size)
          return Status::error(r.url + ": asked for bytes from " + std::to_string(p.size) + ", got Content-Range \"" +
                               (range == head.headers.end() ? std::string() : range->second) + "\"");
      } else {
        // The whole file again (a server without ranges, or a fresh start).
        if (p.size > 0) {
          if (Status s = restart_partial(part, p); !s.ok()) return s;
        }
        total = header_number(head.headers, "content-length");
      }
      if (total == 0) total = header_number(head.chain_headers, "x-linked-size");
      const std::string linked = etag_sha256(head.chain_headers);
      if (!linked.empty() && !expected.empty() && linked != lower(expected))
        return Status::error(r.url + ": the listing gives SHA-256 " + expected + " but X-Linked-Etag gives " + linked);
      if (!linked.empty()) expected = linked;
      if (total > p.size && total - p.size > free_bytes(part)) return disk_full(part, p.size, total - p.size);
      fatal = false;
      return Status();
    };
    auto on_body = [&](const char* data, size_t size) -> Status {
      for (size_t done = 0; done < size;) {
        const ssize_t n = ::write(p.fd, data + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          fatal = true;
          if (errno == ENOSPC) return disk_full(part, p.size, total > p.size ? total - p.size : 0);
          return Status::error(part + ": write failed: " + std::strerror(errno));
        }
        done += static_cast<size_t>(n);
        p.size += static_cast<uint64_t>(n);
      }
      p.hash.update(data, size);
      if (r.progress) r.progress(p.size, total);
      return Status();
    };
    auto answer = http_get(r.url, options, on_head, on_body);
    if (answer.ok() && answer->status == 416 && p.size > 0) {
      // Nothing past the end: the part may be whole already, or be longer
      // than the file; start over once, whatever it holds.
      if (Status s = restart_partial(part, p); !s.ok()) return s;
      if (++stalled >= kStalledAttempts) return Status::error(r.url + ": HTTP 416 for every range asked");
      continue;
    }
    if (answer.ok() && (answer->status < 200 || answer->status >= 300))
      return answer_error(answer->status, r.url, !r.bearer.empty());
    const bool whole = answer.ok() && (total == 0 || p.size == total);
    if (whole) break;
    if (fatal) return answer.status();
    stalled = p.size > before ? 0 : stalled + 1;
    if (stalled >= kStalledAttempts)
      return Status::error((answer.ok() ? r.url + ": the answer ended at " + std::to_string(p.size) + " of " +
                                              std::to_string(total) + " bytes"
                                        : answer.status().message()) +
                           " (the partial download is kept; pull again to resume)");
  }
  info.bytes = p.size;
  info.sha256 = p.hash.finish_hex();
  if (!expected.empty()) {
    if (info.sha256 != lower(expected)) {
      ::unlink(part.c_str());
      return Status::error(r.path + ": SHA-256 mismatch: expected " + lower(expected) + ", the download has " +
                           info.sha256 + " (the partial download was deleted)");
    }
    info.verified = true;
  }
  if (::fsync(p.fd) != 0) return Status::error(part + ": fsync failed: " + std::strerror(errno));
  if (::rename(part.c_str(), r.path.c_str()) != 0)
    return Status::error(part + ": cannot rename to " + r.path + ": " + std::strerror(errno));
  return info;
}

}  // namespace

std::string partial_path(const std::string& path) { return path + ".part"; }

Result<DownloadInfo> download_file(const DownloadRequest& r) {
  const std::string part = partial_path(r.path);
  Partial p;
  if (Status s = open_partial(part, p); !s.ok()) return s;
  auto done = fetch_into(r, part, p);
  // A part that never got a byte (the server refused) is no download to resume.
  if (!done.ok() && p.size == 0) ::unlink(part.c_str());
  return done;
}

}  // namespace revis::hub
