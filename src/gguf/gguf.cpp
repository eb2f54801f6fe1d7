// GGUF parsing. The layout (all little-endian):
//   "GGUF" u32:version u64:n_tensors u64:n_kv
//   n_kv x (string:key u32:type value)
//   n_tensors x (string:name u32:n_dims u64[n_dims]:dims u32:type u64:offset)
//   padding to general.alignment, then the tensor data section.
// Strings are u64 length + bytes; arrays are u32 element type + u64 count.
#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace revis::gguf {
namespace {

constexpr int kMaxArrayNesting = 8;   // deeper nesting is certainly hostile
constexpr uint32_t kMaxDims = 4;      // ggml tensors have at most 4 dimensions
// Every metadata value costs about 48 bytes in memory however small it is on
// disk, so a file of huge u8 arrays could blow up ~48x. Real files hold well
// under a million values (vocabulary, scores, types, merges); 16 million
// leaves room for any real vocabulary and caps the memory near 800 MB.
constexpr uint64_t kMaxMetadataValues = uint64_t{16} << 20;

// Smallest encoded size of one value of `type`; used to reject element
// counts that could not possibly fit in the bytes that remain.
uint64_t min_encoded_size(ValueType type) {
  switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 12;
  }
  return 1;
}

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

// Bounds-checked little-endian reader over the file image.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  // Array elements the metadata may still hold (see kMaxMetadataValues).
  uint64_t values_left = kMaxMetadataValues;

  template <typename T>
  Status read(T& out, const std::string& field) {
    if (remaining() < sizeof(T))
      return truncated(field, sizeof(T));
    std::memcpy(&out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_string(std::string& out, const std::string& field) {
    uint64_t len = 0;
    if (Status s = read(len, field + " (string length)"); !s.ok()) return s;
    if (len > remaining())
      return Status::error(field + ": string length " + std::to_string(len) + " at offset " +
                           std::to_string(pos_ - 8) + " exceeds the " +
                           std::to_string(remaining()) + " bytes left in the file");
    out.assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return {};
  }

 private:
  Status truncated(const std::string& field, uint64_t need) const {
    return Status::error(field + ": file truncated at offset " + std::to_string(pos_) +
                         " (need " + std::to_string(need) + " bytes, " +
                         std::to_string(remaining()) + " left)");
  }
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

Status read_value(Cursor& in, ValueType type, Value& out, const std::string& field, int depth);

template <typename Raw, typename Stored>
Status read_scalar(Cursor& in, Value& out, const std::string& field) {
  Raw raw{};
  if (Status s = in.read(raw, field); !s.ok()) return s;
  out.data = static_cast<Stored>(raw);
  return {};
}

Status read_array(Cursor& in, Value& out, const std::string& field, int depth) {
  if (depth >= kMaxArrayNesting)
    return Status::error(field + ": arrays nested deeper than " + std::to_string(kMaxArrayNesting));
  uint32_t raw_type = 0;
  uint64_t count = 0;
  if (Status s = in.read(raw_type, field + " (array element type)"); !s.ok()) return s;
  if (!known_value_type(raw_type))
    return Status::error(field + ": unknown array element type " + std::to_string(raw_type) +
                         " (expected 0..12)");
  if (Status s = in.read(count, field + " (array length)"); !s.ok()) return s;
  Array array;
  array.element_type = static_cast<ValueType>(raw_type);
  if (count > in.remaining() / min_encoded_size(array.element_type))
    return Status::error(field + ": array of " + std::to_string(count) + " " +
                         value_type_name(array.element_type) + " cannot fit in the " +
                         std::to_string(in.remaining()) + " bytes left in the file");
  if (count > in.values_left)
    return Status::error(field + ": array of " + std::to_string(count) + " values exceeds the limit of " +
                         std::to_string(kMaxMetadataValues) + " metadata values per file");
  in.values_left -= count;
  array.items.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    array.items[i].type = array.element_type;
    if (Status s = read_value(in, array.element_type, array.items[i], field, depth + 1); !s.ok())
      return s;
  }
  out.data = std::move(array);
  return {};
}

Status read_value(Cursor& in, ValueType type, Value& out, const std::string& field, int depth) {
  out.type = type;
  switch (type) {
    case ValueType::UINT8: return read_scalar<uint8_t, uint64_t>(in, out, field);
    case ValueType::INT8: return read_scalar<int8_t, int64_t>(in, out, field);
    case ValueType::UINT16: return read_scalar<uint16_t, uint64_t>(in, out, field);
    case ValueType::INT16: return read_scalar<int16_t, int64_t>(in, out, field);
    case ValueType::UINT32: return read_scalar<uint32_t, uint64_t>(in, out, field);
    case ValueType::INT32: return read_scalar<int32_t, int64_t>(in, out, field);
    case ValueType::UINT64: return read_scalar<uint64_t, uint64_t>(in, out, field);
    case ValueType::INT64: return read_scalar<int64_t, int64_t>(in, out, field);
    case ValueType::FLOAT32: return read_scalar<float, double>(in, out, field);
    case ValueType::FLOAT64: return read_scalar<double, double>(in, out, field);
    case ValueType::BOOL: {
      uint8_t b = 0;
      if (Status s = in.read(b, field); !s.ok()) return s;
      if (b > 1) return Status::error(field + ": bool value " + std::to_string(b) + " (expected 0 or 1)");
      out.data = b == 1;
      return {};
    }
    case ValueType::STRING: {
      std::string s;
      if (Status st = in.read_string(s, field); !st.ok()) return st;
      out.data = std::move(s);
      return {};
    }
    case ValueType::ARRAY: return read_array(in, out, field, depth);
  }
  return Status::error(field + ": unknown value type");
}

std::string describe(const Value& v) {
  if (v.type == ValueType::ARRAY && v.as_array())
    return std::string("array of ") + value_type_name(v.as_array()->element_type);
  return value_type_name(v.type);
}

}  // namespace

const char* value_type_name(ValueType type) {
  switch (type) {
    case ValueType::UINT8: return "u8";
    case ValueType::INT8: return "i8";
    case ValueType::UINT16: return "u16";
    case ValueType::INT16: return "i16";
    case ValueType::UINT32: return "u32";
    case ValueType::INT32: return "i32";
    case ValueType::FLOAT32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "u64";
    case ValueType::INT64: return "i64";
    case ValueType::FLOAT64: return "f64";
  }
  return "?";
}

bool Value::is_integer() const {
  return std::holds_alternative<uint64_t>(data) || std::holds_alternative<int64_t>(data);
}
bool Value::is_float() const { return std::holds_alternative<double>(data); }

int64_t Value::as_int() const {
  if (auto* u = std::get_if<uint64_t>(&data)) return static_cast<int64_t>(*u);
  if (auto* i = std::get_if<int64_t>(&data)) return *i;
  if (auto* d = std::get_if<double>(&data)) {
    // A plain cast is undefined for NaN and for values outside int64's range; saturate instead.
    if (std::isnan(*d)) return 0;
    if (*d >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
    if (*d < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(*d);
  }
  if (auto* b = std::get_if<bool>(&data)) return *b ? 1 : 0;
  return 0;
}

double Value::as_double() const {
  if (auto* d = std::get_if<double>(&data)) return *d;
  if (auto* u = std::get_if<uint64_t>(&data)) return static_cast<double>(*u);
  if (auto* i = std::get_if<int64_t>(&data)) return static_cast<double>(*i);
  return 0.0;
}

const std::string* Value::as_string() const { return std::get_if<std::string>(&data); }
const Array* Value::as_array() const { return std::get_if<Array>(&data); }

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

namespace {

// Reads all `size` bytes of fd into dst; an error if the file ends early.
Status read_fully(int fd, uint8_t* dst, uint64_t size) {
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  for (uint64_t done = 0; done < size;) {
    const ssize_t n = ::pread(fd, dst + done, std::min(kChunk, size - done), static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::error(std::string("read failed: ") + std::strerror(errno));
    if (n == 0)
      return Status::error("the file ended at byte " + std::to_string(done) + " while reading it (expected " +
                           std::to_string(size) + " bytes; did it change?)");
    done += static_cast<uint64_t>(n);
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path, Placement placement) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": not a regular file");
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0 && placement == Placement::kMap) {
    void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      return Status::error(path + ": mmap failed: " + std::strerror(errno));
    }
    file->base_ = static_cast<const uint8_t*>(map);
    file->mapped_ = true;
  } else if (file->size_ > 0) {
    auto memory = HugePageMemory::allocate(file->size_, "reading the file into");
    if (!memory.ok()) {
      ::close(fd);
      return memory.status().with_context(path);
    }
    file->copy_ = std::move(*memory);
    file->base_ = file->copy_.data();
    if (Status s = read_fully(fd, file->copy_.data(), file->size_); !s.ok()) {
      ::close(fd);
      return s.with_context(path);
    }
  }
  ::close(fd);  // a mapping of the file keeps it alive
  if (Status s = file->parse_all(); !s.ok()) return s.with_context(path);
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(const uint8_t* bytes, size_t size, std::string name) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = std::move(name);
  file->owned_.assign(bytes, bytes + size);
  file->base_ = file->owned_.data();
  file->size_ = size;
  if (Status s = file->parse_all(); !s.ok()) return s.with_context(file->path_);
  return file;
}

void GgufFile::release(const TensorInfo& t) const { copy_.release(t.data, t.n_bytes); }

GgufFile::~GgufFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(base_), size_);
}

Status GgufFile::parse_all() {
  Cursor in(base_, size_);
  uint32_t magic = 0;
  if (Status s = in.read(magic, "magic"); !s.ok()) return s;
  if (std::memcmp(&magic, "GGUF", 4) != 0) return Status::error("magic: not a GGUF file (expected \"GGUF\")");
  if (Status s = in.read(version_, "version"); !s.ok()) return s;
  if (version_ != 2 && version_ != 3)
    return Status::error("version: " + std::to_string(version_) + " is not supported (expected 2 or 3)");
  uint64_t n_tensors = 0, n_kv = 0;
  if (Status s = in.read(n_tensors, "tensor count"); !s.ok()) return s;
  if (Status s = in.read(n_kv, "metadata count"); !s.ok()) return s;
  // Each key-value takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor at least 8+4+4+8.
  if (n_kv > in.remaining() / 13)
    return Status::error("metadata count: " + std::to_string(n_kv) + " entries cannot fit in the file");
  if (n_tensors > in.remaining() / 24)
    return Status::error("tensor count: " + std::to_string(n_tensors) + " tensors cannot fit in the file");

  std::unordered_set<std::string> seen_keys;
  metadata_.resize(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    KeyValue& kv = metadata_[i];
    const std::string where = "metadata entry " + std::to_string(i);
    if (Status s = in.read_string(kv.key, where + " key"); !s.ok()) return s;
    if (!seen_keys.insert(kv.key).second) return Status::error("metadata key '" + kv.key + "' appears twice");
    uint32_t raw_type = 0;
    if (Status s = in.read(raw_type, kv.key + " (type)"); !s.ok()) return s;
    if (!known_value_type(raw_type))
      return Status::error(kv.key + ": unknown value type " + std::to_string(raw_type) + " (expected 0..12)");
    if (Status s = read_value(in, static_cast<ValueType>(raw_type), kv.value, kv.key, 0); !s.ok()) return s;
  }

  if (const Value* a = find("general.alignment")) {
    if (!a->is_integer() || a->as_int() <= 0 || (a->as_int() & (a->as_int() - 1)) != 0)
      return Status::error("general.alignment: expected a positive power of two");
    alignment_ = static_cast<uint64_t>(a->as_int());
  }

  std::unordered_set<std::string> seen_names;
  tensors_.resize(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo& t = tensors_[i];
    if (Status s = in.read_string(t.name, "tensor " + std::to_string(i) + " name"); !s.ok()) return s;
    if (!seen_names.insert(t.name).second) return Status::error("tensor '" + t.name + "' appears twice");
    const std::string where = "tensor '" + t.name + "'";
    uint32_t n_dims = 0;
    if (Status s = in.read(n_dims, where + " dimension count"); !s.ok()) return s;
    if (n_dims == 0 || n_dims > kMaxDims)
      return Status::error(where + ": " + std::to_string(n_dims) + " dimensions (expected 1..4)");
    t.dims.resize(n_dims);
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      if (Status s = in.read(dim, where + " dimension " + std::to_string(d)); !s.ok()) return s;
      if (dim == 0 || dim > (uint64_t{1} << 40) || n_elements > (uint64_t{1} << 50) / dim)
        return Status::error(where + ": dimension " + std::to_string(d) + " = " + std::to_string(dim) +
                             " is out of range");
      t.dims[d] = static_cast<int64_t>(dim);
      n_elements *= dim;
    }
    uint32_t raw_type = 0;
    if (Status s = in.read(raw_type, where + " type"); !s.ok()) return s;
    const TypeTraits* traits = type_traits(raw_type);
    if (!traits) return Status::error(where + ": unsupported tensor type id " + std::to_string(raw_type));
    t.type = static_cast<TensorType>(raw_type);
    if (t.dims[0] % traits->block_size != 0)
      return Status::error(where + ": row length " + std::to_string(t.dims[0]) + " is not a multiple of the " +
                           traits->name + " block size " + std::to_string(traits->block_size));
    t.n_bytes = n_elements / traits->block_size * traits->block_bytes;
    if (Status s = in.read(t.offset, where + " offset"); !s.ok()) return s;
    if (t.offset % alignment_ != 0)
      return Status::error(where + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                           std::to_string(alignment_));
  }

  data_offset_ = (in.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > size_)
    return Status::error("data section: starts at " + std::to_string(data_offset_) + " beyond the end of the file (" +
                         std::to_string(size_) + " bytes)");
  const uint64_t data_size = size_ > data_offset_ ? size_ - data_offset_ : 0;
  for (TensorInfo& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      return Status::error("tensor '" + t.name + "': data [" + std::to_string(t.offset) + ", +" +
                           std::to_string(t.n_bytes) + ") runs past the end of the data section (" +
                           std::to_string(data_size) + " bytes); the file is truncated");
    t.data = base_ + data_offset_ + t.offset;
  }
  return {};
}

const Value* GgufFile::find(std::string_view key) const {
  for (const KeyValue& kv : metadata_)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

const TensorInfo* GgufFile::tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {
Status wrong_type(std::string_view key, const char* expected, const Value& v) {
  return Status::error(std::string(key) + ": expected " + expected + ", found " + describe(v));
}

// A u64 above INT64_MAX would come back from as_int() as a negative number.
Status check_fits_int64(std::string_view key, const Value& v) {
  if (auto* u = std::get_if<uint64_t>(&v.data); u && *u > uint64_t{std::numeric_limits<int64_t>::max()})
    return Status::error(std::string(key) + ": u64 value " + std::to_string(*u) + " does not fit in a signed 64-bit integer");
  return {};
}

bool is_integer_type(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::INT8 || t == ValueType::UINT16 || t == ValueType::INT16 ||
         t == ValueType::UINT32 || t == ValueType::INT32 || t == ValueType::UINT64 || t == ValueType::INT64;
}
}  // namespace

Result<std::string> GgufFile::get_string(std::string_view key, std::string fallback) const {
  const Value* v = find(key);
  if (!v) return fallback;
  if (!v->as_string()) return wrong_type(key, "string", *v);
  return *v->as_string();
}

Result<int64_t> GgufFile::get_int(std::string_view key, int64_t fallback) const {
  const Value* v = find(key);
  if (!v) return fallback;
  if (!v->is_integer()) return wrong_type(key, "an integer", *v);
  if (Status s = check_fits_int64(key, *v); !s.ok()) return s;
  return v->as_int();
}

Result<double> GgufFile::get_float(std::string_view key, double fallback) const {
  const Value* v = find(key);
  if (!v) return fallback;
  if (!v->is_float() && !v->is_integer()) return wrong_type(key, "a number", *v);
  return v->as_double();
}

Result<bool> GgufFile::get_bool(std::string_view key, bool fallback) const {
  const Value* v = find(key);
  if (!v) return fallback;
  if (auto* b = std::get_if<bool>(&v->data)) return *b;
  return wrong_type(key, "bool", *v);
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  std::vector<std::string> out;
  const Value* v = find(key);
  if (!v) return out;
  const Array* a = v->as_array();
  if (!a || a->element_type != ValueType::STRING) return wrong_type(key, "array of string", *v);
  out.reserve(a->items.size());
  for (const Value& item : a->items) out.push_back(*item.as_string());
  return out;
}

Result<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  std::vector<float> out;
  const Value* v = find(key);
  if (!v) return out;
  const Array* a = v->as_array();
  if (!a || (a->element_type != ValueType::FLOAT32 && a->element_type != ValueType::FLOAT64))
    return wrong_type(key, "array of f32", *v);
  out.reserve(a->items.size());
  for (const Value& item : a->items) out.push_back(static_cast<float>(item.as_double()));
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  std::vector<int64_t> out;
  const Value* v = find(key);
  if (!v) return out;
  const Array* a = v->as_array();
  // Decided by the element type, so that an empty array of strings is still the wrong type.
  if (!a || !(is_integer_type(a->element_type) || a->element_type == ValueType::BOOL))
    return wrong_type(key, "array of integers", *v);
  out.reserve(a->items.size());
  for (const Value& item : a->items) {
    if (Status s = check_fits_int64(key, item); !s.ok()) return s;
    out.push_back(item.as_int());
  }
  return out;
}

}  // namespace revis::gguf
