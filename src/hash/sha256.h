// SHA-256 (FIPS 180-4), incremental. The engine uses it for the model file
// digest (engine/model_digest.h) and the node for the catalogue digest;
// both must be the same on every machine, so a standard hash rather than
// std::hash. Small enough to carry instead of linking a crypto library for
// one function.
//
// Thread-safety: a Sha256 is mutable per-stream state; distinct objects
// share nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace revis {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // Finishes and returns the 32-byte digest; the object must not be reused.
  std::array<uint8_t, 32> finish();
  // finish() as 64 lowercase hex digits.
  std::string finish_hex();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;  // bytes hashed so far
};

// Hex SHA-256 of a string in one call.
std::string sha256_hex(std::string_view text);

}  // namespace revis
