#include "gguf/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <memory>

namespace revis::gguf {
namespace {

class Buffer {
 public:
  template <typename T>
  void put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) { bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, 0); }
  std::vector<uint8_t> bytes;
};

void put_value(Buffer& out, const Value& v) {
  switch (v.type) {
    case ValueType::UINT8: out.put<uint8_t>(static_cast<uint8_t>(v.as_int())); break;
    case ValueType::INT8: out.put<int8_t>(static_cast<int8_t>(v.as_int())); break;
    case ValueType::UINT16: out.put<uint16_t>(static_cast<uint16_t>(v.as_int())); break;
    case ValueType::INT16: out.put<int16_t>(static_cast<int16_t>(v.as_int())); break;
    case ValueType::UINT32: out.put<uint32_t>(static_cast<uint32_t>(v.as_int())); break;
    case ValueType::INT32: out.put<int32_t>(static_cast<int32_t>(v.as_int())); break;
    case ValueType::UINT64: out.put<uint64_t>(static_cast<uint64_t>(v.as_int())); break;
    case ValueType::INT64: out.put<int64_t>(v.as_int()); break;
    case ValueType::FLOAT32: out.put<float>(static_cast<float>(v.as_double())); break;
    case ValueType::FLOAT64: out.put<double>(v.as_double()); break;
    case ValueType::BOOL: out.put<uint8_t>(std::get<bool>(v.data) ? 1 : 0); break;
    case ValueType::STRING: out.put_string(*v.as_string()); break;
    case ValueType::ARRAY: {
      const Array& a = *v.as_array();
      out.put<uint32_t>(static_cast<uint32_t>(a.element_type));
      out.put<uint64_t>(a.items.size());
      for (const Value& item : a.items) put_value(out, item);
      break;
    }
  }
}

template <typename T>
Value array_of(ValueType element_type, const std::vector<T>& items) {
  Array a;
  a.element_type = element_type;
  a.items.reserve(items.size());
  for (const T& item : items) {
    Value v;
    v.type = element_type;
    if constexpr (std::is_same_v<T, std::string>) v.data = item;
    else if constexpr (std::is_floating_point_v<T>) v.data = static_cast<double>(item);
    else v.data = static_cast<int64_t>(item);
    a.items.push_back(std::move(v));
  }
  Value v;
  v.type = ValueType::ARRAY;
  v.data = std::move(a);
  return v;
}

}  // namespace

void GgufWriter::set(const std::string& key, Value value) {
  for (KeyValue& kv : metadata_)
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  metadata_.push_back({key, std::move(value)});
}

void GgufWriter::set_u32(const std::string& key, uint32_t v) { set(key, {ValueType::UINT32, uint64_t{v}}); }
void GgufWriter::set_i32(const std::string& key, int32_t v) { set(key, {ValueType::INT32, int64_t{v}}); }
void GgufWriter::set_f32(const std::string& key, float v) { set(key, {ValueType::FLOAT32, double{v}}); }
void GgufWriter::set_bool(const std::string& key, bool v) { set(key, {ValueType::BOOL, v}); }
void GgufWriter::set_string(const std::string& key, std::string v) { set(key, {ValueType::STRING, std::move(v)}); }
void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  set(key, array_of(ValueType::STRING, v));
}
void GgufWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
  set(key, array_of(ValueType::FLOAT32, v));
}
void GgufWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  set(key, array_of(ValueType::INT32, v));
}

void GgufWriter::copy_metadata(const GgufFile& file) {
  for (const KeyValue& kv : file.metadata()) set(kv.key, kv.value);
}

Status GgufWriter::add_tensor(const std::string& name, TensorType type, std::vector<int64_t> dims, const void* data,
                              size_t n_bytes) {
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  auto copy = std::make_shared<const std::vector<uint8_t>>(bytes, bytes + n_bytes);
  return add_tensor_producer(name, type, std::move(dims), n_bytes,
                             [copy](const Sink& sink) { return sink(copy->data(), copy->size()); });
}

Status GgufWriter::add_tensor_producer(const std::string& name, TensorType type, std::vector<int64_t> dims,
                                       size_t n_bytes, Producer produce) {
  // Refuse what GgufFile would refuse to read back (same limits as the
  // reader); checking the dims first also keeps the product from overflowing.
  const std::string where = "tensor '" + name + "'";
  if (!type_traits(static_cast<uint32_t>(type)))
    return Status::error(where + ": unsupported tensor type id " + std::to_string(static_cast<uint32_t>(type)));
  for (const Tensor& t : tensors_)
    if (t.name == name) return Status::error(where + " appears twice");
  if (dims.empty() || dims.size() > 4)
    return Status::error(where + ": " + std::to_string(dims.size()) + " dimensions (expected 1..4)");
  int64_t n = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] <= 0 || dims[d] > (int64_t{1} << 40) || n > (int64_t{1} << 50) / dims[d])
      return Status::error(where + ": dimension " + std::to_string(d) + " = " + std::to_string(dims[d]) +
                           " is out of range");
    n *= dims[d];
  }
  if (dims[0] % type_traits(type).block_size != 0)
    return Status::error("tensor '" + name + "': row length is not a multiple of the " + type_name(type) + " block");
  if (row_bytes(type, n) != n_bytes)
    return Status::error("tensor '" + name + "': " + std::to_string(n_bytes) + " bytes given, expected " +
                         std::to_string(row_bytes(type, n)));
  tensors_.push_back({name, type, std::move(dims), n_bytes, std::move(produce)});
  return {};
}

Status GgufWriter::write(const std::string& path) const {
  uint64_t alignment = 32;
  for (const KeyValue& kv : metadata_)
    if (kv.key == "general.alignment") {
      // 0 would divide by zero below, and the reader rejects anything but a
      // power of two; the upper bound keeps the padding from exhausting memory.
      const int64_t a = kv.value.is_integer() ? kv.value.as_int() : 0;
      if (a <= 0 || (a & (a - 1)) != 0 || a > (int64_t{1} << 20))
        return Status::error(path + ": general.alignment must be a power of two from 1 to 1048576");
      alignment = static_cast<uint64_t>(a);
    }

  Buffer header;
  header.bytes = {'G', 'G', 'U', 'F'};
  header.put<uint32_t>(3);
  header.put<uint64_t>(tensors_.size());
  header.put<uint64_t>(metadata_.size());
  for (const KeyValue& kv : metadata_) {
    header.put_string(kv.key);
    header.put<uint32_t>(static_cast<uint32_t>(kv.value.type));
    put_value(header, kv.value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    header.put_string(t.name);
    header.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) header.put<uint64_t>(static_cast<uint64_t>(d));
    header.put<uint32_t>(static_cast<uint32_t>(t.type));
    header.put<uint64_t>(offset);
    offset += (t.n_bytes + alignment - 1) / alignment * alignment;
  }
  header.pad_to(alignment);

  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::error(tmp + ": cannot create: " + std::strerror(errno));
  auto put = [&](const void* data, size_t n) -> Status {
    if (std::fwrite(data, 1, n, f) != n) return Status::error(path + ": write failed: " + std::strerror(errno));
    return {};
  };
  Status status = put(header.bytes.data(), header.bytes.size());
  static const uint8_t zeros[256] = {};
  for (const Tensor& t : tensors_) {
    if (!status.ok()) break;
    size_t produced = 0;
    status = t.produce([&](const void* data, size_t n) -> Status {
      if (produced + n > t.n_bytes) return Status::error("tensor '" + t.name + "': more bytes than its type and shape hold");
      produced += n;
      return put(data, n);
    });
    if (status.ok() && produced != t.n_bytes)
      status = Status::error("tensor '" + t.name + "': " + std::to_string(produced) + " bytes produced, expected " +
                             std::to_string(t.n_bytes));
    for (size_t left = (alignment - t.n_bytes % alignment) % alignment; status.ok() && left > 0;) {
      const size_t n = std::min(left, sizeof zeros);
      status = put(zeros, n);
      left -= n;
    }
  }
  if (std::fclose(f) != 0 && status.ok()) status = Status::error(path + ": write failed: " + std::strerror(errno));
  if (status.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    status = Status::error(path + ": cannot rename " + tmp + ": " + std::strerror(errno));
  if (!status.ok()) std::remove(tmp.c_str());
  return status;
}

}  // namespace revis::gguf
