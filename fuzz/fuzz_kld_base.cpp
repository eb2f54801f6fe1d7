// libFuzzer target for the reader of `revis perplexity --kl-divergence-base`
// files. Any byte string must either be refused with a non-empty message or
// give a header whose tokens lie in the vocabulary and rows that decode to
// n_vocab finite log-probabilities with the top inside it, or an error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tools/kld_base_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto reader = revis::KldBaseReader::parse(std::vector<uint8_t>(data, data + size), "<fuzz>");
  if (!reader.ok()) {
    if (reader.status().message().empty()) std::abort();
    return 0;
  }
  const revis::KldBaseHeader& h = (*reader)->header();
  for (int32_t t : h.tokens)
    if (t < 0 || t >= h.n_vocab) std::abort();
  for (int r = 0; r < 4; ++r) {
    auto row = (*reader)->next_row();
    if (!row.ok()) {
      if (row.status().message().empty()) std::abort();
      break;
    }
    if (row->top < 0 || row->top >= h.n_vocab || row->log_probs.size() != static_cast<size_t>(h.n_vocab)) std::abort();
  }
  return 0;
}
