// Binder: looks up a model's tensors in a GGUF file by name and checks each
// against the shape the config expects, for the loaders of weights.cpp and
// deepseek4_weights.cpp. Errors name the tensor, the shape expected and the
// shape found.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/weights.h"
#include "quant/quant.h"
#include "revis/status.h"

namespace revis {

inline std::string shape(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

class Binder {
 public:
  explicit Binder(const gguf::GgufFile& file) : file_(file) {}

  // A matrix (or stack of matrices) with exactly these dims, innermost first.
  Status matrix(const std::string& name, std::vector<int64_t> dims, Matrix& out, bool optional = false) const {
    const gguf::TensorInfo* t = file_.tensor(name);
    if (!t) return optional ? Status() : Status::error("tensor '" + name + "' is missing (expected shape " + shape(dims) + ")");
    if (t->dims != dims)
      return Status::error("tensor '" + name + "': shape " + t->shape_string() + ", expected " + shape(dims));
    if (!can_dequantize(t->type) || t->type == TensorType::Q8_K)
      return Status::error("tensor '" + name + "': type " + type_name(t->type) + " is not supported for weights");
    int64_t values = 1;
    for (int64_t d : dims) values *= d;
    if (const int64_t block = first_invalid_block(t->type, t->data, values); block >= 0)
      return Status::error("tensor '" + name + "': block " + std::to_string(block) + " has an invalid " +
                           type_name(t->type) + " scale (exponent 0xff is NaN)");
    out.type = t->type;
    out.cols = dims[0];
    out.rows = dims.size() > 1 ? dims[1] : 1;
    out.n_mats = dims.size() > 2 ? dims[2] : 1;
    out.row_bytes = row_bytes(t->type, out.cols);
    out.data = t->data;
    return {};
  }

  bool has(const std::string& name) const { return file_.tensor(name) != nullptr; }

  // A 1-D tensor of n values, converted to float32.
  Status vector(const std::string& name, int64_t n, std::vector<float>& out, bool optional = false) const {
    Matrix m;
    if (Status s = matrix(name, {n}, m, optional); !s.ok() || m.empty()) return s;
    out.resize(n);
    dequantize_row(m.type, m.data, out.data(), n);
    return {};
  }

  // A 2-D tensor of `rows` rows of n values (per-expert biases), converted
  // to float32, row after row.
  Status rows(const std::string& name, int64_t n, int64_t rows, std::vector<float>& out) const {
    Matrix m;
    if (Status s = matrix(name, {n, rows}, m); !s.ok()) return s;
    out.resize(static_cast<size_t>(n * rows));
    for (int64_t r = 0; r < rows; ++r) dequantize_row(m.type, m.row(r), &out[r * n], n);
    return {};
  }

  // A table of int32 values (type I32) with exactly these dims.
  Status int32s(const std::string& name, const std::vector<int64_t>& dims, std::vector<int32_t>& out) const {
    const gguf::TensorInfo* t = file_.tensor(name);
    if (!t) return Status::error("tensor '" + name + "' is missing (expected I32 of shape " + shape(dims) + ")");
    if (t->dims != dims)
      return Status::error("tensor '" + name + "': shape " + t->shape_string() + ", expected " + shape(dims));
    if (t->type != TensorType::I32)
      return Status::error("tensor '" + name + "': type " + type_name(t->type) + ", expected I32");
    out.resize(t->n_bytes / sizeof(int32_t));
    std::memcpy(out.data(), t->data, out.size() * sizeof(int32_t));
    return {};
  }

 private:
  const gguf::GgufFile& file_;
};

// The multi-token-prediction block's own tensors (blk.{n_layer}.nextn.*:
// eh_proj, the norms, and the optional embedding and head, which fall back
// to the model's) into n; its layer is bound by the caller (weights.cpp).
Status bind_nextn_head(const Binder& bind, const ModelConfig& c, const ModelWeights& w, NextnWeights& n);

// Binds deepseek4's tensors (config.h's Deepseek4): its blocks into
// w.ds4_layers, its output hyper-connection into w.hc_head, and its
// multi-token-prediction block, where the file has one, as
// w.ds4_layers[n_layer] and w.nextn (deepseek4_weights.cpp).
Status bind_deepseek4(const Binder& bind, const ModelConfig& c, ModelWeights& w);

}  // namespace revis
