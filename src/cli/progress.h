// A one-line progress indicator on stderr for long jobs (quantize, mkmodel).
#pragma once

#include <cstdio>
#include <string>

namespace revis::cli {

inline void print_progress(const char* verb, size_t done, size_t total, const std::string& item) {
  if (done < total)
    std::fprintf(stderr, "\r%s [%zu/%zu] %-40.40s", verb, done + 1, total, item.c_str());
  else
    std::fprintf(stderr, "\r%s [%zu/%zu] done%-40s\n", verb, total, total, "");
  std::fflush(stderr);
}

}  // namespace revis::cli
