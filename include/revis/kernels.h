// The matrix kernels' backends ("scalar", "avx2", "avx512", "neon"): which
// ones this binary carries, which one runs, and choosing another for a
// benchmark. The best one the CPU supports runs unless one is chosen.
//
// Thread-safety: the queries may be called from any thread;
// use_kernel_backend must not run while a model evaluates.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "revis/status.h"

namespace revis::kernels {

// Compiled into this binary, whether or not this CPU can run them.
std::vector<std::string> built_in();
// The one the matrix products run on now.
std::string active();
// Runs the products on the backend `name` from now on; an error names the
// choices when there is no such backend, or says that this CPU cannot run it.
Status use(std::string_view name);

}  // namespace revis::kernels
