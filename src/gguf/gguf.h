// Reading GGUF files (versions 2 and 3, little-endian).
//
// GgufFile::open maps a file read-only, or reads it into memory of its own,
// and parses its header, metadata and tensor table. Every count, length,
// offset and dimension is checked against the bytes actually present before
// it is used, so a truncated or hostile file yields an error naming the field
// and what was expected, never a crash or a huge allocation. TensorInfo::data
// points into the mapping or the copy, which lives as long as the GgufFile.
// A GgufFile is immutable after open (but for release(), which a model
// calls at load) and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gguf/huge_page_memory.h"
#include "quant/types.h"
#include "revis/status.h"

namespace revis::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* value_type_name(ValueType type);

struct Value;
struct Array {
  ValueType element_type = ValueType::UINT8;
  std::vector<Value> items;
};

// One metadata value. Integers of every width are held as int64/uint64,
// floats as double; `type` remembers what the file said.
struct Value {
  ValueType type = ValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;

  bool is_integer() const;
  bool is_float() const;
  // Numeric value converted; meaningless unless is_integer() or is_float().
  int64_t as_int() const;
  double as_double() const;
  const std::string* as_string() const;  // nullptr unless STRING
  const Array* as_array() const;         // nullptr unless ARRAY
};

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::F32;
  std::vector<int64_t> dims;   // dims[0] is the innermost (row length)
  uint64_t offset = 0;         // relative to the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;

  int64_t n_elements() const;
  int64_t rows() const { return dims.empty() ? 0 : n_elements() / dims[0]; }
  std::string shape_string() const;  // "[2048, 128256]"
};

// Where open() puts the file's bytes.
//   kMap:  a read-only mapping of the file: nothing is read until used, the
//          page cache's copy is shared with other processes, and a file
//          larger than RAM still runs, paged in from disk as it is read.
//   kCopy: anonymous memory, in 2 MiB huge pages where the system has them
//          (Linux's transparent huge pages), read in full at open. A mapped
//          file sits in 4 KiB pages, and streaming a model's weights once
//          per token through them costs a TLB miss every 4 KiB and stops
//          the hardware prefetchers at each page's end: in huge pages
//          decoding runs faster (docs/performance.md).
enum class Placement { kMap, kCopy };

class GgufFile {
 public:
  // Opens and parses `path`. Errors name the path and the offending field.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path, Placement placement = Placement::kMap);
  // Parses a copy of an in-memory image (used by the fuzzer and tests).
  static Result<std::unique_ptr<GgufFile>> parse(const uint8_t* bytes, size_t size,
                                                std::string name = "<memory>");
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }
  // The whole file as mapped, copied or parsed from memory.
  std::span<const uint8_t> bytes() const { return {base_, size_}; }
  // kCopy for a file opened so (or parsed from memory), else kMap.
  Placement placement() const { return !copy_.empty() || !owned_.empty() ? Placement::kCopy : Placement::kMap; }
  // For a file read into memory by open(kCopy): gives the pages that hold
  // only tensor t's bytes back to the system, for a model that keeps t in
  // a layout of its own; they read as zeros afterwards. Nothing otherwise.
  void release(const TensorInfo& t) const;

  const std::vector<KeyValue>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  const Value* find(std::string_view key) const;
  const TensorInfo* tensor(std::string_view name) const;

  // Typed getters: a missing key gives `fallback`; a key of the wrong type is
  // an error that names the key and both types.
  Result<std::string> get_string(std::string_view key, std::string fallback = "") const;
  Result<int64_t> get_int(std::string_view key, int64_t fallback) const;
  Result<double> get_float(std::string_view key, double fallback) const;
  Result<bool> get_bool(std::string_view key, bool fallback) const;
  // Array getters: a missing key gives an empty vector.
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_float_array(std::string_view key) const;
  // Integers of any width; an array of booleans (per-layer flags) reads as 0 and 1.
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;

 private:
  GgufFile() = default;
  Status parse_all();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;          // base_ is a mapping of the file
  HugePageMemory copy_;          // the bytes open(kCopy) read
  std::vector<uint8_t> owned_;   // the bytes parse() was given
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> metadata_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace revis::gguf
