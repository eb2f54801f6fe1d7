#include "kvstore/checksum.h"

#include <xxhash.h>

namespace revis::kvstore {

uint64_t checksum64(const void* data, size_t size, uint64_t seed) { return XXH3_64bits_withSeed(data, size, seed); }

// XXH3_state_t is large (about 600 bytes) and wants 64-byte alignment; the
// library allocates it as it needs.
struct StreamingChecksum::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

StreamingChecksum::StreamingChecksum() : state_(new State) { XXH3_64bits_reset(state_->xxh); }
StreamingChecksum::~StreamingChecksum() = default;

void StreamingChecksum::update(const void* data, size_t size) { XXH3_64bits_update(state_->xxh, data, size); }
uint64_t StreamingChecksum::digest() const { return XXH3_64bits_digest(state_->xxh); }

std::string hex64(uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) s[i] = digits[value & 15];
  return s;
}

}  // namespace revis::kvstore
