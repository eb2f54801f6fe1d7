// A tiny little-endian byte builder for hand-made GGUF images. The hostile
// tests need files that GgufWriter refuses to produce (bad counts, unknown
// types, overlapping offsets), so they are spelled out byte by byte here,
// independently of the writer under test.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace revis::gguf::testing {

class GgufBytes {
 public:
  // Appends a fixed-width value in host (= little-endian on every target we build for) order.
  template <typename T>
  GgufBytes& put(T value) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
    return *this;
  }
  GgufBytes& u8(uint8_t v) { return put(v); }
  GgufBytes& u32(uint32_t v) { return put(v); }
  GgufBytes& u64(uint64_t v) { return put(v); }
  GgufBytes& i32(int32_t v) { return put(v); }
  GgufBytes& f32(float v) { return put(v); }
  GgufBytes& raw(std::string_view text) {
    bytes_.insert(bytes_.end(), text.begin(), text.end());
    return *this;
  }
  // A GGUF string: u64 length, then the bytes (no terminator).
  GgufBytes& str(std::string_view text) { return u64(text.size()).raw(text); }
  GgufBytes& zeros(size_t count) {
    bytes_.resize(bytes_.size() + count, 0);
    return *this;
  }
  GgufBytes& pad_to(size_t alignment) {
    bytes_.resize((bytes_.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }

  // "GGUF", version, tensor count, metadata count.
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  // The start of a metadata entry: key and value type; the caller appends the value.
  GgufBytes& key(std::string_view name, ValueType type) { return str(name).u32(static_cast<uint32_t>(type)); }
  GgufBytes& key(std::string_view name, uint32_t raw_type) { return str(name).u32(raw_type); }
  // The start of an array value: element type and count; the caller appends the elements.
  GgufBytes& array_header(ValueType element_type, uint64_t count) {
    return u32(static_cast<uint32_t>(element_type)).u64(count);
  }
  // One tensor-table entry.
  GgufBytes& tensor_info(std::string_view name, std::initializer_list<uint64_t> dims, uint32_t raw_type,
                         uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(raw_type).u64(offset);
  }
  GgufBytes& tensor_info(std::string_view name, std::initializer_list<uint64_t> dims, TensorType type,
                         uint64_t offset) {
    return tensor_info(name, dims, static_cast<uint32_t>(type), offset);
  }

  // Overwrites bytes already written, for patching a field of a valid image.
  template <typename T>
  void patch(size_t offset, T value) {
    std::memcpy(bytes_.data() + offset, &value, sizeof(T));
  }

  size_t size() const { return bytes_.size(); }
  const uint8_t* data() const { return bytes_.data(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace revis::gguf::testing
