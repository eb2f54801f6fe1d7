// GgufWriter: builds a GGUF v3 file from metadata and tensors, for
// `revis quantize`, `revis mkmodel` and tests. Metadata keeps insertion
// order; tensor data is aligned to general.alignment (default 32). The file
// is written to PATH.tmp and renamed, so readers never see half a file.
// Tensors are either copied in (add_tensor) or produced during write()
// (add_tensor_producer), one after the other, so that writing a model needs
// no more memory than its largest piece, not the whole file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace revis::gguf {

class GgufWriter {
 public:
  // Sets or replaces a metadata entry.
  void set(const std::string& key, Value value);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, std::string v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  // Copies every metadata entry of another file.
  void copy_metadata(const GgufFile& file);

  // Adds a tensor; dims innermost first. The bytes are copied.
  Status add_tensor(const std::string& name, TensorType type, std::vector<int64_t> dims, const void* data,
                    size_t n_bytes);

  // Receives a tensor's bytes in order, in pieces of any size.
  using Sink = std::function<Status(const void* data, size_t n_bytes)>;
  using Producer = std::function<Status(const Sink& sink)>;
  // Adds a tensor whose n_bytes bytes `produce` hands to its sink when
  // write() reaches it. write() fails if it produces a different count or
  // fails itself.
  Status add_tensor_producer(const std::string& name, TensorType type, std::vector<int64_t> dims, size_t n_bytes,
                             Producer produce);

  Status write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> dims;
    size_t n_bytes;
    Producer produce;
  };
  std::vector<KeyValue> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace revis::gguf
