// gpu::Device: one Vulkan device opened for compute, the backend the model
// offloads its layers to (model/device_layers.h). It hands out buffers of
// device memory, copies to and from them, and runs the compute shaders
// compiled into the binary (src/gpu/shaders/, shader_code below) as one
// recorded stream of dispatches, each seeing the writes of those before it.
// The shaders that reduce across a workgroup (matmul, rms_norm, attention)
// come in two builds: with subgroup arithmetic, run where the device has it
// for compute shaders, and through shared memory only, run elsewhere or
// when DeviceOptions asks. Each is batch invariant; their last bits differ.
//
// A build without Vulkan (no libvulkan-dev or glslc at configure time) has
// the same interface: list_devices() and Device::open() then fail, saying
// so. Errors are Status values naming what failed and, for memory, the
// bytes asked for and left.
//
// Not thread-safe: one Device is driven from one thread at a time (the
// model's forward pass, which callers serialise).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "revis/status.h"

namespace revis::gpu {

struct DeviceInfo {
  int index = 0;                    // the N of --device vulkan:N, in the loader's order
  std::string name;                 // "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string type;                 // discrete, integrated, virtual, cpu, other
  std::string driver;               // driver name and version
  uint64_t memory_bytes = 0;        // the largest device-local heap
  uint64_t max_buffer_bytes = 0;    // the largest range one shader binding may address
  uint32_t subgroup_size = 0;
  bool subgroup_arithmetic = false;  // subgroupAdd/subgroupMax in compute shaders
  bool float16 = false;             // shaderFloat16
  bool storage16 = false;           // 16-bit storage buffers
  bool cooperative_matrix = false;  // VK_KHR_cooperative_matrix
};

// Whether this build has the Vulkan backend.
bool built_with_vulkan();
// Every device the Vulkan loader sees, in its order.
Result<std::vector<DeviceInfo>> list_devices();
// The SPIR-V words of a compiled shader by name ("rms_norm", "matmul_q8_0"),
// empty when there is none.
std::span<const uint32_t> shader_code(std::string_view name);

class Device;

struct DeviceOptions {
  // Use the subgroup build of the reducing shaders where the device has
  // subgroup arithmetic. false keeps the shared-memory build everywhere:
  // how the tests cover that path on a device that has subgroups.
  bool subgroups = true;
};

// A range of device memory. Move-only; freed when destroyed, so it must not
// outlive its Device.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  bool empty() const { return device_ == nullptr; }
  size_t bytes() const { return bytes_; }

 private:
  friend class Device;

struct DeviceOptions {
  // Use the subgroup build of the reducing shaders where the device has
  // subgroup arithmetic. false keeps the shared-memory build everywhere:
  // how the tests cover that path on a device that has subgroups.
  bool subgroups = true;
};
  Device* device_ = nullptr;
  uint32_t slot_ = 0;
  size_t bytes_ = 0;
};

class Device {
 public:
  // Opens device `index` of list_devices() for compute.
  static Result<std::unique_ptr<Device>> open(int index, DeviceOptions options = {});
  ~Device();

  const DeviceInfo& info() const;
  // Whether the reducing shaders run their subgroup build on this device.
  bool uses_subgroups() const;
  // Bytes of the buffers alive now.
  uint64_t bytes_in_use() const;

  // A buffer of `bytes` (rounded up to 16). `what` names it in the error
  // when the device has no room: the bytes asked for and those left.
  Result<Buffer> allocate(size_t bytes, std::string_view what);
  // Copies between host memory and a buffer, waiting until done. Outside a
  // recording only.
  Status write(Buffer& to, size_t offset, const void* data, size_t bytes);
  Status read(const Buffer& from, size_t offset, void* data, size_t bytes);

  // Records dispatches of shader `kernel` over groups (x, y, z), its
  // bindings 0.. the given buffers in order, `push` its push constants (at
  // most 128 bytes). Each dispatch sees the writes of the dispatches
  // recorded before it. run() submits them all and waits.
  void begin();
  void dispatch(std::string_view kernel, std::initializer_list<const Buffer*> bindings, const void* push,
                size_t push_bytes, uint32_t x, uint32_t y = 1, uint32_t z = 1);
  Status run();

 private:
  friend class Buffer;
  struct Impl;
  explicit Device(std::unique_ptr<Impl> impl);
  void release(uint32_t slot);
  std::unique_ptr<Impl> impl_;
};

}  // namespace revis::gpu
