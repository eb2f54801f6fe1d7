// Copies of a shared GGUF file with a change on the way, for the tests that
// feed a loader a hostile or altered file.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"

namespace revis::testing {

// A change to one tensor on its way into the copy: keep it (return true,
// possibly with new dims or bytes), or drop it (false).
using TensorEdit = std::function<bool(const gguf::TensorInfo& t, std::vector<int64_t>& dims,
                                      std::vector<uint8_t>& bytes, gguf::GgufWriter& out)>;

// Copies `from` to `path` through `edit`; `metadata` may then override keys.
inline void write_gguf_copy(const std::string& from, const std::string& path, const TensorEdit& edit,
                            const std::function<void(gguf::GgufWriter&)>& metadata = nullptr) {
  auto in = gguf::GgufFile::open(from);
  ASSERT_TRUE(in.ok()) << in.status().message();
  gguf::GgufWriter out;
  out.copy_metadata(**in);
  if (metadata) metadata(out);
  for (const gguf::TensorInfo& t : (*in)->tensors()) {
    std::vector<int64_t> dims = t.dims;
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    if (!edit(t, dims, bytes, out)) continue;
    ASSERT_TRUE(out.add_tensor(t.name, t.type, dims, bytes.data(), bytes.size()).ok()) << t.name;
  }
  ASSERT_TRUE(out.write(path).ok());
}

// Copies `from` to `path` without tensor `name`.
inline void write_gguf_without(const std::string& from, const std::string& path, const std::string& name) {
  write_gguf_copy(from, path, [&](const gguf::TensorInfo& t, std::vector<int64_t>&, std::vector<uint8_t>&,
                                  gguf::GgufWriter&) { return t.name != name; });
}

// Copies `from` to `path` with tensor `name` of `dims`, its bytes cut or
// zero-padded to `n_bytes`.
inline void write_gguf_reshaped(const std::string& from, const std::string& path, const std::string& name,
                                const std::vector<int64_t>& dims, size_t n_bytes) {
  write_gguf_copy(from, path, [&](const gguf::TensorInfo& t, std::vector<int64_t>& d, std::vector<uint8_t>& bytes,
                                  gguf::GgufWriter&) {
    if (t.name == name) {
      d = dims;
      bytes.resize(n_bytes);
    }
    return true;
  });
}

}  // namespace revis::testing
