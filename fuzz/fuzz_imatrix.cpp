// libFuzzer target for the importance matrix reader (GGUF and .dat). Any
// byte string must either be refused with a non-empty message or yield
// entries whose importance can be asked for at the entry's own row length
// and at a few others, every answer a value or an error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "tools/imatrix_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto imatrix = revis::parse_imatrix(data, size, "<fuzz>");
  if (!imatrix.ok()) {
    if (imatrix.status().message().empty()) std::abort();
    return 0;
  }
  for (const auto& [name, entry] : imatrix->entries)
    for (int64_t n_per_row : {entry.n_per_row, int64_t{1}, int64_t{7}, int64_t{256}})
      for (int64_t mat : {int64_t{0}, entry.n_mat - 1, entry.n_mat}) {
        auto importance = imatrix->importance(name, n_per_row, mat);
        if (importance.ok() && !importance->empty() && importance->size() != static_cast<size_t>(n_per_row)) std::abort();
      }
  return 0;
}
