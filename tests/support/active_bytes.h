// The weight bytes a token reads, counted from a file's tensor table: what
// ModelInfo::bytes_per_token must come to.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "gguf/gguf.h"

namespace revis::testing {

// Every matrix, one row of token_embd, n_used of each stack of n_expert
// expert matrices; 1-D tensors and those `skip` names are no products.
inline uint64_t active_weight_bytes(const gguf::GgufFile& file, int n_expert, int n_used,
                                    const std::function<bool(const std::string&)>& skip = nullptr) {
  uint64_t total = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.dims.size() < 2 || (skip && skip(t.name))) continue;
    if (t.name == "token_embd.weight")
      total += t.n_bytes / t.dims[1];  // one row
    else if (t.name.find("_exps.") != std::string::npos)
      total += t.n_bytes / n_expert * n_used;
    else
      total += t.n_bytes;
  }
  return total;
}

}  // namespace revis::testing
