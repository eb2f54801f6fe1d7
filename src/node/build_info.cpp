#include "node/build_info.h"

#include "revis/kernels.h"

#ifndef REVIS_VERSION
#define REVIS_VERSION "unknown"
#endif
#ifndef REVIS_GIT_COMMIT
#define REVIS_GIT_COMMIT "unknown"
#endif

namespace revis::node {

BuildInfo build_info() {
  return {REVIS_VERSION, REVIS_GIT_COMMIT, kernels::built_in(), kernels::active()};
}

std::string version_text() {
  const BuildInfo b = build_info();
  std::string kernels;
  for (const std::string& k : b.kernels) kernels += (kernels.empty() ? "" : " ") + k;
  return "revis " + b.version + " (commit " + b.commit + ")\nkernels: " + kernels + " (this CPU: " + b.active_kernel + ")";
}

}  // namespace revis::node
