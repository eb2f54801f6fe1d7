// checksum64: a fast 64-bit checksum of a byte range, for detecting torn,
// truncated or bit-flipped checkpoint files (and for naming prefixes).
//
// Not cryptographic: it guards against accidents, not attackers. It must
// read a 4k-token checkpoint (about 128 MiB for a 1B model) in well under
// the time a disk read takes, which rules out SHA-256 (~0.5 s) and favours
// four independent multiply lanes over 32-byte stripes. The value is defined
// on little-endian 64-bit words, the same on every machine; docs/kvstore.md
// gives the exact definition. Chaining (the result as the next seed) hashes
// several ranges as one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace revis::kvstore {

uint64_t checksum64(const void* data, size_t size, uint64_t seed = 0);

// 16 lowercase hex digits, as file names and `revis kv ls` show checksums
// and model fingerprints.
std::string hex64(uint64_t value);

}  // namespace revis::kvstore
