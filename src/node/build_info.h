// What this binary is: its version, the git commit it was built from
// (taken when CMake configured the build; "unknown" outside a checkout),
// and the kernel backends compiled in, with the one this CPU runs.
// `revis --version` prints it; /v1/revis/status reports it.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace revis::node {

struct BuildInfo {
  std::string version;
  std::string commit;
  std::vector<std::string> kernels;  // built in
  std::string active_kernel;         // the best of them this CPU supports
};

BuildInfo build_info();
// "revis 0.1.0 (commit 1a2b3c4)\nkernels: scalar avx2 avx512 (this CPU: avx512)"
std::string version_text();

}  // namespace revis::node
