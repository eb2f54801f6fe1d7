#include "model/striped_weights.h"

#include <map>

#include "quant/quant.h"

namespace revis {
namespace {

// Every matrix of a layer, for code that treats them alike.
std::vector<Matrix*> layer_matrices(LayerWeights& l) {
  return {&l.wq,       &l.wk,     &l.wv,       &l.wo,        &l.wq_a,     &l.wq_b,     &l.wkv_a,
          &l.wk_b,     &l.wv_b,   &l.w_gate,   &l.w_up,      &l.w_down,   &l.router,   &l.gate_exps,
          &l.up_exps,  &l.down_exps, &l.gate_shexp, &l.up_shexp, &l.down_shexp};
}

// The stripe form MatMul would use for m, or null.
const PackedDot* stripe_form(const Matrix& m) {
  if (m.empty() || m.stripes) return nullptr;
  const PackedDot* form = dot_kernels(m.type, m.cols).packed4;
  return form && form->weight_rows > 1 && form->dot_one && form->repack_weights ? form : nullptr;
}

constexpr uint64_t kAlignment = 64;

}  // namespace

Result<StripedWeights> stripe_weights(ModelWeights& weights,
                                      const std::function<void(const uint8_t*)>& replaced) {
  // The matrices to stripe, aliases (a tied output and the MTP block's
  // head, which fall back to other matrices) grouped by the data they share.
  std::map<const uint8_t*, std::vector<Matrix*>> by_data;
  auto consider = [&](Matrix* m) {
    if (stripe_form(*m)) by_data[m->data].push_back(m);
  };
  consider(&weights.output);
  for (LayerWeights& l : weights.layers)
    for (Matrix* m : layer_matrices(l)) consider(m);
  for (NextnWeights& n : weights.nextn) {
    for (Matrix* m : layer_matrices(n.layer)) consider(m);
    consider(&n.eh_proj);
    consider(&n.head);
  }

  StripedWeights striped;
  uint64_t total = 0;
  for (auto& [data, aliases] : by_data) {
    const Matrix& m = *aliases.front();
    const PackedDot* form = stripe_form(m);
    const int64_t stored_rows = (m.rows + form->weight_rows - 1) / form->weight_rows * form->weight_rows;
    total += (form->weight_bytes(m.cols) * stored_rows * m.n_mats + kAlignment - 1) / kAlignment * kAlignment;
  }
  if (total == 0) return striped;
  auto memory = HugePageMemory::allocate(total, "the weights in stripes");
  if (!memory.ok()) return memory.status();
  striped.memory = std::move(*memory);

  uint8_t* out = striped.memory.data();
  for (auto& [data, aliases] : by_data) {
    const Matrix& m = *aliases.front();
    const PackedDot* form = stripe_form(m);
    Matrix s = m;
    s.stripes = form;
    s.row_bytes = form->weight_bytes(m.cols);
    s.data = out;
    const size_t stored_bytes = static_cast<size_t>(s.stored_rows()) * s.row_bytes;
    for (int64_t mat = 0; mat < m.n_mats; ++mat)
      form->repack_weights(m.data + static_cast<size_t>(mat) * m.rows * m.row_bytes, m.row_bytes, m.rows, m.cols,
                           out + mat * stored_bytes);
    out += (stored_bytes * m.n_mats + kAlignment - 1) / kAlignment * kAlignment;
    for (Matrix* alias : aliases) *alias = s;
    ++striped.matrices;
    if (replaced) replaced(data);
  }
  return striped;
}

}  // namespace revis
