#include "model/weights.h"

#include "quant/quant.h"

namespace revis {
namespace {

std::string shape(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

class Binder {
 public:
  explicit Binder(const gguf::GgufFile& file) : file_(file) {}

  // A matrix (or stack of matrices) with exactly these dims, innermost first.
  Status matrix(const std::string& name, std::vector<int64_t> dims, Matrix& out, bool optional = false) {
    const gguf::TensorInfo* t = file_.tensor(name);
    if (!t) return optional ? Status() : Status::error("tensor '" + name + "' is missing (expected shape " + shape(dims) + ")");
    if (t->dims != dims)
      return Status::error("tensor '" + name + "': shape " + t->shape_string() + ", expected " + shape(dims));
    if (!can_dequantize(t->type) || t->type == TensorType::Q8_K)
      return Status::error("tensor '" + name + "': type " + type_name(t->type) + " is not supported for weights");
    out.type = t->type;
    out.cols = dims[0];
    out.rows = dims.size() > 1 ? dims[1] : 1;
    out.n_mats = dims.size() > 2 ? dims[2] : 1;
    out.row_bytes = row_bytes(t->type, out.cols);
    out.data = t->data;
    return {};
  }

  // A 1-D tensor of n values, converted to float32.
  Status vector(const std::string& name, int64_t n, std::vector<float>& out, bool optional = false) {
    Matrix m;
    if (Status s = matrix(name, {n}, m, optional); !s.ok() || m.empty()) return s;
    out.resize(n);
    dequantize_row(m.type, m.data, out.data(), n);
    return {};
  }

 private:
  const gguf::GgufFile& file_;
};

}  // namespace

Matrix Matrix::slice(int64_t mat) const {
  Matrix m = *this;
  m.n_mats = 1;
  m.data = data + static_cast<size_t>(mat) * rows * row_bytes;
  return m;
}

Result<ModelWeights> load_model_weights(const gguf::GgufFile& file, ModelConfig& c) {
  ModelWeights w;
  Binder bind(file);
  const gguf::TensorInfo* embd = file.tensor("token_embd.weight");
  if (!embd) return Status::error("tensor 'token_embd.weight' is missing");
  if (embd->dims.size() != 2) return Status::error("tensor 'token_embd.weight': expected 2 dimensions, found " + embd->shape_string());
  if (embd->dims[1] > (1 << 24)) return Status::error("tensor 'token_embd.weight': vocabulary of " + std::to_string(embd->dims[1]) + " is too large");
  c.n_vocab = static_cast<int>(embd->dims[1]);
  const int64_t d = c.n_embd, v = c.n_vocab;
  Status s;
  if (!(s = bind.matrix("token_embd.weight", {d, v}, w.token_embd)).ok()) return s;
  if (!(s = bind.vector("output_norm.weight", d, w.output_norm)).ok()) return s;
  if (!(s = bind.matrix("output.weight", {d, v}, w.output, /*optional=*/true)).ok()) return s;
  if (w.output.empty()) w.output = w.token_embd;  // tied embeddings
  if (!(s = bind.vector("rope_freqs.weight", c.rope_dims / 2, w.rope_freq_factors, true)).ok()) return s;

  w.layers.resize(c.n_layer);
  for (int i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = w.layers[i];
    const std::string p = "blk." + std::to_string(i) + ".";
    const int64_t q = c.q_dim(), kvk = c.kv_dim_k(), kvv = c.kv_dim_v();
    if (!(s = bind.vector(p + "attn_norm.weight", d, l.attn_norm)).ok()) return s;
    if (!(s = bind.matrix(p + "attn_q.weight", {d, q}, l.wq)).ok()) return s;
    if (!(s = bind.matrix(p + "attn_k.weight", {d, kvk}, l.wk)).ok()) return s;
    if (!(s = bind.matrix(p + "attn_v.weight", {d, kvv}, l.wv)).ok()) return s;
    if (!(s = bind.matrix(p + "attn_output.weight", {c.n_head * int64_t{c.head_dim_v}, d}, l.wo)).ok()) return s;
    if (c.has_qkv_bias) {
      if (!(s = bind.vector(p + "attn_q.bias", q, l.bq)).ok()) return s;
      if (!(s = bind.vector(p + "attn_k.bias", kvk, l.bk)).ok()) return s;
      if (!(s = bind.vector(p + "attn_v.bias", kvv, l.bv)).ok()) return s;
    }
    if (c.has_qk_norm) {
      if (!(s = bind.vector(p + "attn_q_norm.weight", c.head_dim_k, l.q_norm)).ok()) return s;
      if (!(s = bind.vector(p + "attn_k_norm.weight", c.head_dim_k, l.k_norm)).ok()) return s;
    }
    if (!(s = bind.vector(p + "ffn_norm.weight", d, l.ffn_norm)).ok()) return s;
    if (c.n_expert > 0) {
      const int64_t e = c.n_expert, f = c.n_ff_expert;
      if (!(s = bind.matrix(p + "ffn_gate_inp.weight", {d, e}, l.router)).ok()) return s;
      if (!(s = bind.matrix(p + "ffn_gate_exps.weight", {d, f, e}, l.gate_exps)).ok()) return s;
      if (!(s = bind.matrix(p + "ffn_up_exps.weight", {d, f, e}, l.up_exps)).ok()) return s;
      if (!(s = bind.matrix(p + "ffn_down_exps.weight", {f, d, e}, l.down_exps)).ok()) return s;
    } else {
      const int64_t f = c.n_ff;
      if (!(s = bind.matrix(p + "ffn_gate.weight", {d, f}, l.w_gate)).ok()) return s;
      if (!(s = bind.matrix(p + "ffn_up.weight", {d, f}, l.w_up)).ok()) return s;
      if (!(s = bind.matrix(p + "ffn_down.weight", {f, d}, l.w_down)).ok()) return s;
    }
  }
  return w;
}

}  // namespace revis
