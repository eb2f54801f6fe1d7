// Kernel backends in tests: the ones this CPU has, and a switch to one for
// a scope that switches back at its end, also when an assertion returns
// early (the backend is process-wide, and later tests expect the default).
#pragma once

#include <vector>

#include "quant/quant.h"

namespace revis::testing {

inline std::vector<KernelBackend> supported_kernel_backends() {
  std::vector<KernelBackend> out;
  for (KernelBackend backend : kKernelBackends)
    if (kernel_backend_supported(backend)) out.push_back(backend);
  return out;
}

class ScopedKernelBackend {
 public:
  explicit ScopedKernelBackend(KernelBackend backend) : ok_(use_kernel_backend(backend).ok()) {}
  ~ScopedKernelBackend() { (void)use_kernel_backend(previous_); }
  ScopedKernelBackend(const ScopedKernelBackend&) = delete;
  ScopedKernelBackend& operator=(const ScopedKernelBackend&) = delete;

  bool ok() const { return ok_; }

 private:
  KernelBackend previous_ = active_kernel_backend();  // declared first: read before the switch
  bool ok_;
};

}  // namespace revis::testing
