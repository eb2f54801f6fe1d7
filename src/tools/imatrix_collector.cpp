#include "tools/imatrix_collector.h"

#include <algorithm>

namespace revis {

ImatrixCollector::ImatrixCollector(const gguf::GgufFile& file, Imatrix start) : imatrix_(std::move(start)) {
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.name.rfind("blk.", 0) != 0 || t.dims.size() < 2) continue;
    const int64_t n_mat = t.dims.size() >= 3 ? t.dims[2] : 1;
    ranges_.push_back({t.data, t.n_bytes, t.n_bytes / static_cast<size_t>(n_mat), t.dims[0], n_mat, t.name});
  }
  std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
}

void ImatrixCollector::on_matmul(const Matrix& w, const float* x, int n_tokens, int64_t x_stride) {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), w.data,
                             [](const uint8_t* p, const Range& r) { return p < r.begin; });
  if (it == ranges_.begin()) return;
  const Range& range = *--it;
  if (w.data >= range.begin + range.bytes || w.cols != range.cols) return;
  const int64_t mat = static_cast<int64_t>(static_cast<size_t>(w.data - range.begin) / range.mat_bytes);

  ImatrixEntry& entry = imatrix_.entries[range.name];
  if (entry.sum2.empty()) {
    entry.n_per_row = range.cols;
    entry.n_mat = range.n_mat;
    entry.sum2.assign(static_cast<size_t>(range.cols * range.n_mat), 0.0f);
    entry.counts.assign(static_cast<size_t>(range.n_mat), 0.0f);
  } else if (entry.n_per_row != range.cols || entry.n_mat != range.n_mat) {
    if (status_.ok())
      status_ = Status::error("imatrix entry '" + range.name + "' has " + std::to_string(entry.n_mat) + " x " +
                              std::to_string(entry.n_per_row) + " values, expected " + std::to_string(range.n_mat) +
                              " x " + std::to_string(range.cols) + " for this model");
    return;
  }
  float* sum2 = &entry.sum2[static_cast<size_t>(mat * range.cols)];
  for (int t = 0; t < n_tokens; ++t) {
    const float* row = x + t * x_stride;
    for (int64_t j = 0; j < range.cols; ++j) sum2[j] += row[j] * row[j];
  }
  entry.counts[static_cast<size_t>(mat)] += static_cast<float>(n_tokens);
}

}  // namespace revis
