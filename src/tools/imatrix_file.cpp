#include "tools/imatrix_file.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"

namespace revis {
namespace {

constexpr const char* kSum2Suffix = ".in_sum2";
constexpr const char* kCountsSuffix = ".counts";

// --- GGUF ----------------------------------------------------------------------

Result<std::vector<float>> f32_tensor(const std::string& path, const gguf::TensorInfo& t) {
  if (t.type != TensorType::F32)
    return Status::error(path + ": tensor '" + t.name + "' has type " + type_name(t.type) + " (expected F32)");
  std::vector<float> values(static_cast<size_t>(t.n_elements()));
  std::memcpy(values.data(), t.data, values.size() * sizeof(float));
  return values;
}

Result<Imatrix> read_gguf(const std::string& path, const uint8_t* bytes, size_t size) {
  auto opened = gguf::GgufFile::parse(bytes, size, path);
  if (!opened.ok()) return opened.status();
  const gguf::GgufFile& file = **opened;
  auto type = file.get_string("general.type");
  if (!type.ok()) return type.status().with_context(path);
  if (*type != "imatrix")
    return Status::error(path + ": general.type is '" + *type + "' (expected 'imatrix'): not an importance matrix");
  Imatrix imatrix;
  auto datasets = file.get_string_array("imatrix.datasets");
  auto chunk_count = file.get_int("imatrix.chunk_count", 0);
  auto chunk_size = file.get_int("imatrix.chunk_size", 0);
  if (!datasets.ok()) return datasets.status().with_context(path);
  if (!chunk_count.ok()) return chunk_count.status().with_context(path);
  if (!chunk_size.ok()) return chunk_size.status().with_context(path);
  imatrix.datasets = *datasets;
  imatrix.chunk_count = *chunk_count;
  imatrix.chunk_size = *chunk_size;

  const std::string sum2_suffix = kSum2Suffix;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.name.ends_with(kCountsSuffix)) continue;  // taken with its in_sum2
    if (!t.name.ends_with(sum2_suffix))
      return Status::error(path + ": tensor '" + t.name + "' is neither NAME.in_sum2 nor NAME.counts");
    const std::string name = t.name.substr(0, t.name.size() - sum2_suffix.size());
    const gguf::TensorInfo* counts = file.tensor(name + kCountsSuffix);
    if (counts == nullptr) return Status::error(path + ": tensor '" + t.name + "' has no '" + name + kCountsSuffix + "'");
    if (t.dims.size() > 2) return Status::error(path + ": tensor '" + t.name + "' has " + t.shape_string() + " (expected [n_per_row, n_mat])");
    ImatrixEntry entry;
    entry.n_per_row = t.dims[0];
    entry.n_mat = t.dims.size() == 2 ? t.dims[1] : 1;
    if (counts->n_elements() != entry.n_mat)
      return Status::error(path + ": tensor '" + counts->name + "' has " + std::to_string(counts->n_elements()) +
                           " values (expected " + std::to_string(entry.n_mat) + ", one per matrix of '" + t.name + "')");
    auto sum2 = f32_tensor(path, t);
    if (!sum2.ok()) return sum2.status();
    auto count_values = f32_tensor(path, *counts);
    if (!count_values.ok()) return count_values.status();
    entry.sum2 = std::move(*sum2);
    entry.counts = std::move(*count_values);
    imatrix.entries[name] = std::move(entry);
  }
  return imatrix;
}

// --- .dat ----------------------------------------------------------------------

// Reads little-endian fields from the bytes of a file, checking each
// against what is left.
class DatReader {
 public:
  DatReader(const std::string& path, const std::vector<uint8_t>& bytes) : path_(path), bytes_(bytes) {}

  Result<int32_t> i32(const char* field) {
    int32_t v;
    if (Status s = take(&v, sizeof v, field); !s.ok()) return s;
    return v;
  }
  Status take(void* out, size_t n, const char* field) {
    if (n > bytes_.size() - at_)
      return Status::error(path_ + ": " + field + " at byte " + std::to_string(at_) + " needs " + std::to_string(n) +
                           " bytes, the file has " + std::to_string(bytes_.size() - at_) + " left");
    std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
    return {};
  }
  bool at_end() const { return at_ == bytes_.size(); }
  size_t left() const { return bytes_.size() - at_; }

 private:
  const std::string& path_;
  const std::vector<uint8_t>& bytes_;
  size_t at_ = 0;
};

Result<Imatrix> read_dat(const std::string& path, const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  DatReader in(path, bytes);
  auto n_entries = in.i32("entry count");
  if (!n_entries.ok()) return n_entries.status();
  if (*n_entries < 1) return Status::error(path + ": entry count " + std::to_string(*n_entries) + " (expected at least 1)");
  Imatrix imatrix;
  for (int32_t e = 0; e < *n_entries; ++e) {
    auto length = in.i32("name length");
    if (!length.ok()) return length.status();
    if (*length < 1 || *length > 4096)
      return Status::error(path + ": entry " + std::to_string(e) + " name length " + std::to_string(*length) + " (expected 1..4096)");
    std::string name(static_cast<size_t>(*length), '\0');
    if (Status s = in.take(name.data(), name.size(), "name"); !s.ok()) return s;
    auto ncall = in.i32("ncall");
    if (!ncall.ok()) return ncall.status();
    auto n_values = in.i32("value count");
    if (!n_values.ok()) return n_values.status();
    if (*ncall < 0 || *n_values < 1)
      return Status::error(path + ": entry '" + name + "' has ncall " + std::to_string(*ncall) + " and " +
                           std::to_string(*n_values) + " values (expected ncall >= 0 and at least 1 value)");
    // Checked before the allocation: a hostile count must not reserve gigabytes.
    if (static_cast<size_t>(*n_values) > in.left() / sizeof(float))
      return Status::error(path + ": entry '" + name + "' claims " + std::to_string(*n_values) + " values, the file has " +
                           std::to_string(in.left()) + " bytes left");
    ImatrixEntry entry;
    entry.n_per_row = *n_values;  // experts are told apart later, against the model's tensor
    entry.sum2.resize(static_cast<size_t>(*n_values));
    if (Status s = in.take(entry.sum2.data(), entry.sum2.size() * sizeof(float), "values"); !s.ok()) return s;
    entry.counts = {static_cast<float>(*ncall)};
    if (!imatrix.entries.emplace(name, std::move(entry)).second)
      return Status::error(path + ": entry '" + name + "' appears twice");
  }
  if (in.at_end()) return imatrix;
  auto chunk_count = in.i32("chunk count");
  if (!chunk_count.ok()) return chunk_count.status();
  imatrix.chunk_count = *chunk_count;
  if (in.at_end()) return imatrix;
  auto length = in.i32("dataset name length");
  if (!length.ok()) return length.status();
  if (*length < 0 || *length > 1 << 20)
    return Status::error(path + ": dataset name length " + std::to_string(*length) + " (expected 0..1048576)");
  std::string dataset(static_cast<size_t>(*length), '\0');
  if (Status s = in.take(dataset.data(), dataset.size(), "dataset name"); !s.ok()) return s;
  imatrix.datasets.push_back(dataset);
  return imatrix;
}

void append(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
void append_i32(std::string& out, int32_t v) { append(out, &v, sizeof v); }

}  // namespace

Result<std::vector<float>> Imatrix::importance(const std::string& name, int64_t n_per_row, int64_t mat) const {
  auto it = entries.find(name);
  if (it == entries.end()) return std::vector<float>{};
  const ImatrixEntry& e = it->second;
  // A .dat entry holds every expert in one row and one count for them all.
  const bool one_row_of_all = e.n_mat == 1 && n_per_row > 0 && e.n_per_row % n_per_row == 0;
  const int64_t n_mat = one_row_of_all ? e.n_per_row / n_per_row : e.n_mat;
  if ((e.n_per_row != n_per_row && !one_row_of_all) || mat < 0 || mat >= n_mat)
    return Status::error("importance matrix entry '" + name + "' has " + std::to_string(e.n_mat) + " x " +
                         std::to_string(e.n_per_row) + " values (expected matrix " + std::to_string(mat) + " of rows of " +
                         std::to_string(n_per_row) + ")");
  const float count = e.counts[one_row_of_all ? 0 : static_cast<size_t>(mat)];
  if (!(count > 0)) return std::vector<float>{};
  std::vector<float> mean(static_cast<size_t>(n_per_row));
  for (int64_t i = 0; i < n_per_row; ++i) mean[static_cast<size_t>(i)] = e.sum2[static_cast<size_t>(mat * n_per_row + i)] / count;
  return mean;
}

Result<Imatrix> parse_imatrix(const uint8_t* bytes, size_t size, const std::string& name) {
  if (size >= 4 && std::memcmp(bytes, "GGUF", 4) == 0) return read_gguf(name, bytes, size);
  return read_dat(name, bytes, size);
}

Result<Imatrix> read_imatrix(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_imatrix(bytes.data(), bytes.size(), path);
}

Status write_imatrix_gguf(const Imatrix& imatrix, const std::string& path) {
  gguf::GgufWriter out;
  out.set_string("general.type", "imatrix");
  out.set_string_array("imatrix.datasets", imatrix.datasets);
  out.set_u32("imatrix.chunk_count", static_cast<uint32_t>(imatrix.chunk_count));
  out.set_u32("imatrix.chunk_size", static_cast<uint32_t>(imatrix.chunk_size));
  for (const auto& [name, e] : imatrix.entries) {
    std::vector<int64_t> dims = {e.n_per_row};
    if (e.n_mat > 1) dims.push_back(e.n_mat);
    if (Status s = out.add_tensor(name + kSum2Suffix, TensorType::F32, dims, e.sum2.data(), e.sum2.size() * sizeof(float));
        !s.ok())
      return s.with_context(path);
    const std::vector<int64_t> count_dims = e.n_mat > 1 ? std::vector<int64_t>{1, e.n_mat} : std::vector<int64_t>{1};
    if (Status s = out.add_tensor(name + kCountsSuffix, TensorType::F32, count_dims, e.counts.data(),
                                  e.counts.size() * sizeof(float));
        !s.ok())
      return s.with_context(path);
  }
  return out.write(path);
}

Status write_imatrix_dat(const Imatrix& imatrix, const std::string& path) {
  std::string out;
  append_i32(out, static_cast<int32_t>(imatrix.entries.size()));
  for (const auto& [name, e] : imatrix.entries) {
    float ncall = 0;
    for (float c : e.counts) ncall = std::fmax(ncall, c);
    std::vector<float> values(e.sum2.size());
    for (int64_t m = 0; m < e.n_mat; ++m) {
      const float count = e.counts[static_cast<size_t>(m)];
      for (int64_t i = 0; i < e.n_per_row; ++i) {
        const size_t at = static_cast<size_t>(m * e.n_per_row + i);
        values[at] = count > 0 ? e.sum2[at] / count * ncall : 0.0f;
      }
    }
    append_i32(out, static_cast<int32_t>(name.size()));
    out += name;
    append_i32(out, static_cast<int32_t>(ncall));
    append_i32(out, static_cast<int32_t>(values.size()));
    append(out, values.data(), values.size() * sizeof(float));
  }
  append_i32(out, static_cast<int32_t>(imatrix.chunk_count));
  const std::string dataset = imatrix.datasets.empty() ? "" : imatrix.datasets.front();
  append_i32(out, static_cast<int32_t>(dataset.size()));
  out += dataset;
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!file) return Status::error(temporary + ": cannot write");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) return Status::error(path + ": cannot rename " + temporary + " to it");
  return {};
}

}  // namespace revis
