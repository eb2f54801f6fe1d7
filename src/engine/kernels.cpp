// Implementation of include/revis/kernels.h over the quant module's dispatch.
#include "revis/kernels.h"

#include "quant/quant.h"

namespace revis::kernels {

std::vector<std::string> built_in() {
  std::vector<std::string> names;
  for (KernelBackend backend : kKernelBackends)
    if (kernel_backend_built_in(backend)) names.push_back(kernel_backend_name(backend));
  return names;
}

std::string active() { return kernel_backend_name(active_kernel_backend()); }

Status use(std::string_view name) {
  auto backend = parse_kernel_backend(name);
  if (!backend.ok()) return backend.status();
  return use_kernel_backend(*backend);
}

}  // namespace revis::kernels
