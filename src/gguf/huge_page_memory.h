// HugePageMemory: anonymous memory that starts on a 2 MiB boundary and asks
// the kernel for transparent huge pages (MADV_HUGEPAGE), for weights that
// are streamed once per token: in 4 KiB pages that costs a TLB miss every
// 4 KiB and stops the hardware prefetchers at each page's end. Where the
// system has no huge pages it is plain anonymous memory. Freed when
// destroyed; release() hands pages inside it back early.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "revis/status.h"

namespace revis {

class HugePageMemory {
 public:
  HugePageMemory() = default;
  // At least `bytes` bytes of zeros (none for 0); `what` names them in the error.
  static Result<HugePageMemory> allocate(uint64_t bytes, const std::string& what);
  ~HugePageMemory();
  HugePageMemory(HugePageMemory&& other) noexcept;
  HugePageMemory& operator=(HugePageMemory&& other) noexcept;
  HugePageMemory(const HugePageMemory&) = delete;
  HugePageMemory& operator=(const HugePageMemory&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  bool empty() const { return data_ == nullptr; }

  // Gives the whole pages inside [p, p + bytes) back to the system; they
  // read as zeros afterwards. For bytes nobody will read again.
  void release(const uint8_t* p, uint64_t bytes) const;

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;  // the mapping's length: `bytes` rounded up to 2 MiB
};

}  // namespace revis
