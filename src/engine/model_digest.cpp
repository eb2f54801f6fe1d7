#include "engine/model_digest.h"

#include <algorithm>

#include "hash/sha256.h"

namespace revis {
namespace {

constexpr uint64_t kWholeFileLimit = 32ull << 20;
constexpr uint64_t kEdgeBytes = 4ull << 20;
constexpr uint64_t kSampleBytes = 256ull << 10;
constexpr int kSamples = 32;

}  // namespace

std::string model_digest(std::span<const uint8_t> file) {
  const uint64_t size = file.size();
  Sha256 h;
  if (size <= kWholeFileLimit) {
    h.update(file.data(), file.size());
    return "sha256:" + h.finish_hex();
  }
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(size >> (8 * i));
  h.update(len, 8);
  h.update(file.data(), kEdgeBytes);
  const uint64_t middle = size - 2 * kEdgeBytes;  // > 0 since size > 32 MiB
  for (int i = 0; i < kSamples; ++i)
    h.update(file.data() + kEdgeBytes + (middle - kSampleBytes) / (kSamples - 1) * i, kSampleBytes);
  h.update(file.data() + size - kEdgeBytes, kEdgeBytes);
  return "sha256-sampled:" + h.finish_hex();
}

uint64_t model_fingerprint(std::string_view digest) {
  const size_t colon = digest.find(':');
  if (colon == std::string_view::npos || digest.size() < colon + 1 + 16) return 0;
  uint64_t value = 0;
  for (char c : digest.substr(colon + 1, 16)) {
    const int nibble = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (nibble < 0) return 0;
    value = value << 4 | static_cast<uint64_t>(nibble);
  }
  return value;
}

}  // namespace revis
