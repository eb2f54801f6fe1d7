#include "gguf/huge_page_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace revis {
namespace {
constexpr uint64_t kHugePage = uint64_t{2} << 20;
}  // namespace

Result<HugePageMemory> HugePageMemory::allocate(uint64_t bytes, const std::string& what) {
  HugePageMemory memory;
  if (bytes == 0) return memory;
  const uint64_t rounded = (bytes + kHugePage - 1) & ~(kHugePage - 1);
  // One huge page more than needed, so that an aligned start fits; the
  // unaligned head and the tail beyond it are unmapped again.
  void* raw = ::mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    return Status::error("cannot allocate " + std::to_string(bytes >> 20) + " MiB for " + what + ": " +
                         std::strerror(errno));
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  const uintptr_t tail = start + rounded + kHugePage - (aligned + rounded);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + rounded), tail);
#ifdef MADV_HUGEPAGE
  ::madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);
#endif
  memory.data_ = reinterpret_cast<uint8_t*>(aligned);
  memory.size_ = rounded;
  return memory;
}

HugePageMemory::~HugePageMemory() {
  if (data_) ::munmap(data_, size_);
}

HugePageMemory::HugePageMemory(HugePageMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HugePageMemory& HugePageMemory::operator=(HugePageMemory&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void HugePageMemory::release(const uint8_t* p, uint64_t bytes) const {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = std::max(reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(data_));
  const uintptr_t end = std::min(reinterpret_cast<uintptr_t>(p) + bytes, reinterpret_cast<uintptr_t>(data_) + size_);
  const uintptr_t first = (begin + page - 1) & ~(page - 1), last = end & ~(page - 1);
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace revis
