// device.h in a build without Vulkan: every entry point says so.
#include "gpu/device.h"

namespace revis::gpu {
namespace {
Status no_vulkan() {
  return Status::error("this revis was built without Vulkan (install libvulkan-dev and glslc, then rebuild; "
                       "scripts/install-deps.sh does both)");
}
}  // namespace

bool built_with_vulkan() { return false; }
Result<std::vector<DeviceInfo>> list_devices() { return no_vulkan(); }
std::span<const uint32_t> shader_code(std::string_view) { return {}; }

struct Device::Impl {};
Device::Device(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Device::~Device() = default;
Result<std::unique_ptr<Device>> Device::open(int, DeviceOptions) { return no_vulkan(); }
const DeviceInfo& Device::info() const {
  static const DeviceInfo none;
  return none;
}
uint64_t Device::bytes_in_use() const { return 0; }
bool Device::uses_subgroups() const { return false; }
Result<Buffer> Device::allocate(size_t, std::string_view) { return no_vulkan(); }
Status Device::write(Buffer&, size_t, const void*, size_t) { return no_vulkan(); }
Status Device::read(const Buffer&, size_t, void*, size_t) { return no_vulkan(); }
void Device::begin() {}
void Device::dispatch(std::string_view, std::initializer_list<const Buffer*>, const void*, size_t, uint32_t, uint32_t,
                      uint32_t) {}
Status Device::run() { return no_vulkan(); }
void Device::release(uint32_t) {}
Buffer& Buffer::operator=(Buffer&& other) noexcept {
  device_ = nullptr;
  bytes_ = other.bytes_;
  return *this;
}
Buffer::~Buffer() = default;

}  // namespace revis::gpu
