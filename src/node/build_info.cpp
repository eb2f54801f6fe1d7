#include "node/build_info.h"

#include "quant/quant.h"

#ifndef REVIS_VERSION
#define REVIS_VERSION "unknown"
#endif
#ifndef REVIS_GIT_COMMIT
#define REVIS_GIT_COMMIT "unknown"
#endif

namespace revis::node {

BuildInfo build_info() {
  BuildInfo b{REVIS_VERSION, REVIS_GIT_COMMIT, {}, kernel_backend_name(active_kernel_backend())};
  for (KernelBackend k : kKernelBackends)
    if (kernel_backend_built_in(k)) b.kernels.push_back(kernel_backend_name(k));
  return b;
}

std::string version_text() {
  const BuildInfo b = build_info();
  std::string kernels;
  for (const std::string& k : b.kernels) kernels += (kernels.empty() ? "" : " ") + k;
  return "revis " + b.version + " (commit " + b.commit + ")\nkernels: " + kernels + " (this CPU: " + b.active_kernel + ")";
}

}  // namespace revis::node
