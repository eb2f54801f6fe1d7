// checksum64: a fast 64-bit checksum of a byte range, for detecting torn,
// truncated or bit-flipped checkpoint files (and for naming prefixes).
//
// It is XXH3-64 (Debian's libxxhash), seeded: a well-studied hash that runs
// at tens of GB/s on one core, so verifying a checkpoint costs a small part
// of reading it from disk. Not cryptographic: it guards against accidents,
// not attackers. The value is defined on the bytes (little-endian reads),
// the same on every machine. Chaining (the result as the next seed) hashes
// several ranges as one; StreamingChecksum hashes one range delivered in
// pieces, equal to checksum64 of their concatenation with seed 0.
//
// Thread-safety: checksum64 is a pure function; a StreamingChecksum belongs
// to one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace revis::kvstore {

uint64_t checksum64(const void* data, size_t size, uint64_t seed = 0);

// 16 lowercase hex digits, as file names and `revis kv ls` show checksums
// and model fingerprints.
std::string hex64(uint64_t value);

class StreamingChecksum {
 public:
  StreamingChecksum();
  ~StreamingChecksum();
  StreamingChecksum(const StreamingChecksum&) = delete;
  StreamingChecksum& operator=(const StreamingChecksum&) = delete;

  void update(const void* data, size_t size);
  uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace revis::kvstore
