#include "model/striped_weights.h"

#include <map>

#include "quant/quant.h"

namespace revis {
namespace {

// The stripe form MatMul would use for m, or null.
const PackedDot* stripe_form(const Matrix& m) {
  return m.empty() || m.stripes ? nullptr : revis::stripe_form(m.type, m.cols);
}

// m as it will be in stripes (data not set yet), and the bytes it takes.
Matrix striped_view(const Matrix& m) {
  Matrix s = m;
  s.stripes = stripe_form(m);
  s.row_bytes = s.stripes->weight_bytes(m.cols);
  s.data = nullptr;
  return s;
}
size_t striped_bytes(const Matrix& s) {
  constexpr size_t kAlignment = 64;
  return (static_cast<size_t>(s.stored_rows()) * s.row_bytes * s.n_mats + kAlignment - 1) / kAlignment * kAlignment;
}

// Stripes each group of matrices sharing their data (aliases: a tied
// output, the MTP block's head) once, and points them all at it.
Result<StripedWeights> stripe_groups(const std::map<const uint8_t*, std::vector<Matrix*>>& by_data,
                                     const std::function<void(const uint8_t*)>& replaced) {
  StripedWeights striped;
  size_t total = 0;
  for (const auto& [data, aliases] : by_data) total += striped_bytes(striped_view(*aliases.front()));
  if (total == 0) return striped;
  auto memory = HugePageMemory::allocate(total, "the weights in stripes");
  if (!memory.ok()) return memory.status();
  striped.memory = std::move(*memory);

  uint8_t* out = striped.memory.data();
  for (const auto& [data, aliases] : by_data) {
    const Matrix& m = *aliases.front();
    Matrix s = striped_view(m);
    s.data = out;
    const size_t one_matrix = static_cast<size_t>(s.stored_rows()) * s.row_bytes;  // a stack as Matrix::slice reads it
    for (int64_t mat = 0; mat < m.n_mats; ++mat)
      s.stripes->repack_weights(m.data + static_cast<size_t>(mat) * m.rows * m.row_bytes, m.row_bytes, m.rows, m.cols,
                                out + mat * one_matrix);
    out += striped_bytes(s);
    for (Matrix* alias : aliases) *alias = s;
    ++striped.matrices;
    if (replaced) replaced(data);
  }
  return striped;
}

}  // namespace

Result<StripedWeights> stripe_weights(ModelWeights& weights, const std::function<void(const uint8_t*)>& replaced,
                                      const std::vector<bool>& layers_elsewhere) {
  std::map<const uint8_t*, std::vector<Matrix*>> by_data;
  auto consider = [&](Matrix* m) {
    if (stripe_form(*m)) by_data[m->data].push_back(m);
  };
  consider(&weights.output);
  for (size_t i = 0; i < weights.layers.size(); ++i)
    if (i >= layers_elsewhere.size() || !layers_elsewhere[i])
      for (Matrix* m : weights.layers[i].matrices()) consider(m);
  for (Deepseek4Layer& l : weights.ds4_layers)
    for (Matrix* m : l.matrices()) consider(m);
  for (NextnWeights& n : weights.nextn) {
    for (Matrix* m : n.layer.matrices()) consider(m);
    consider(&n.eh_proj);
    consider(&n.head);
  }
  return stripe_groups(by_data, replaced);
}

Result<StripedWeights> stripe_matrix(Matrix& m) {
  std::map<const uint8_t*, std::vector<Matrix*>> by_data;
  if (stripe_form(m)) by_data[m.data] = {&m};
  return stripe_groups(by_data, {});
}

}  // namespace revis
