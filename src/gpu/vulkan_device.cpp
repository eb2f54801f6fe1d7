// The Vulkan implementation of device.h. Buffers live in device-local
// memory; where that memory is also visible to the host (integrated GPUs,
// lavapipe, resizable BAR) copies go straight through a mapping, otherwise
// through a staging buffer and a copy command. Shaders bind their buffers
// with push descriptors (VK_KHR_push_descriptor), so recording a dispatch
// needs no descriptor pools or sets; one pipeline per shader is made at
// first use and kept, from the shader's _subgroups build where the device
// runs those (uses_subgroups) and the shader has one.
#include "gpu/device.h"

#include <vulkan/vulkan.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

namespace revis::gpu {
namespace {

constexpr uint32_t kMaxBindings = 12;
constexpr size_t kStagingBytes = 64u << 20;

std::string vk_error(const char* what, VkResult r) { return std::string(what) + " failed (VkResult " + std::to_string(r) + ")"; }

// One instance for the process: the loader's device list and every Device
// hang off it. Made at first use; a failure is remembered and reported.
struct Instance {
  VkInstance handle = VK_NULL_HANDLE;
  std::string error;
};

Instance& instance() {
  static Instance inst;
  static std::once_flag once;
  std::call_once(once, [] {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "revis";
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    info.pApplicationInfo = &app;
    if (VkResult r = vkCreateInstance(&info, nullptr, &inst.handle); r != VK_SUCCESS) {
      inst.error = r == VK_ERROR_INCOMPATIBLE_DRIVER ? "no Vulkan driver is installed (on Debian: mesa-vulkan-drivers, "
                                                       "or the GPU vendor's driver)"
                                                     : vk_error("vkCreateInstance", r);
      inst.handle = VK_NULL_HANDLE;
    }
  });
  return inst;
}

Result<std::vector<VkPhysicalDevice>> physical_devices() {
  Instance& inst = instance();
  if (!inst.handle) return Status::error("Vulkan: " + inst.error);
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(inst.handle, &n, nullptr);
  std::vector<VkPhysicalDevice> devices(n);
  vkEnumeratePhysicalDevices(inst.handle, &n, devices.data());
  return devices;
}

bool has_extension(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> ext(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data());
  return std::any_of(ext.begin(), ext.end(), [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

DeviceInfo describe(VkPhysicalDevice pd, int index) {
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(pd, &props);
  VkPhysicalDeviceShaderFloat16Int8Features f16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDevice16BitStorageFeatures s16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  f16.pNext = &s16;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &f16;
  vkGetPhysicalDeviceFeatures2(pd, &features);
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);

  DeviceInfo info;
  info.index = index;
  info.name = props.properties.deviceName;
  switch (props.properties.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: info.type = "discrete"; break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: info.type = "integrated"; break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: info.type = "virtual"; break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: info.type = "cpu"; break;
    default: info.type = "other";
  }
  const uint32_t v = props.properties.driverVersion;
  info.driver = "Vulkan " + std::to_string(VK_API_VERSION_MAJOR(props.properties.apiVersion)) + "." +
                std::to_string(VK_API_VERSION_MINOR(props.properties.apiVersion)) + ", driver " + std::to_string(v);
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.memory_bytes = std::max<uint64_t>(info.memory_bytes, mem.memoryHeaps[h].size);
  info.max_buffer_bytes = props.properties.limits.maxStorageBufferRange;
  info.subgroup_size = subgroup.subgroupSize;
  const VkSubgroupFeatureFlags needed = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
  info.subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                             (subgroup.supportedOperations & needed) == needed;
  info.float16 = f16.shaderFloat16;
  info.storage16 = s16.storageBuffer16BitAccess;
  info.cooperative_matrix = has_extension(pd, "VK_KHR_cooperative_matrix");
  return info;
}

}  // namespace

bool built_with_vulkan() { return true; }

Result<std::vector<DeviceInfo>> list_devices() {
  auto devices = physical_devices();
  if (!devices.ok()) return devices.status();
  std::vector<DeviceInfo> out;
  for (size_t i = 0; i < devices->size(); ++i) out.push_back(describe((*devices)[i], static_cast<int>(i)));
  return out;
}

struct Device::Impl {
  DeviceInfo info;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory{};
  PFN_vkCmdPushDescriptorSetKHR push_descriptors = nullptr;
  bool subgroups = false;  // run the _subgroups builds of the reducing shaders
  bool recording = false;
  std::string record_error;  // the first failure while recording, reported by run()

  struct Slot {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    void* mapped = nullptr;  // where the memory is host-visible
    size_t bytes = 0;
  };
  std::vector<Slot> slots;
  std::vector<uint32_t> free_slots;
  uint64_t in_use = 0;
  Slot staging;

  struct Kernel {
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
  };
  std::map<std::string, Kernel, std::less<>> kernels;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;  // kMaxBindings storage buffers, push descriptors
  VkPipelineLayout layout = VK_NULL_HANDLE;           // that set and 128 bytes of push constants

  ~Impl();
  Result<Slot> make_slot(size_t bytes, bool host_visible, std::string_view what);
  void free_slot(Slot& s);
  Result<const Kernel*> kernel(std::string_view name);
  Status submit_and_wait();
  Status copy(VkBuffer src, VkBuffer dst, size_t src_offset, size_t dst_offset, size_t bytes);
  // The staging buffer of copies to and from memory the host cannot see, made at first use.
  Status make_staging();
};

Device::Impl::~Impl() {
  if (!device) return;
  vkDeviceWaitIdle(device);
  for (Slot& s : slots) free_slot(s);
  free_slot(staging);
  for (auto& [name, k] : kernels) vkDestroyPipeline(device, k.pipeline, nullptr);
  if (layout) vkDestroyPipelineLayout(device, layout, nullptr);
  if (set_layout) vkDestroyDescriptorSetLayout(device, set_layout, nullptr);
  if (fence) vkDestroyFence(device, fence, nullptr);
  if (pool) vkDestroyCommandPool(device, pool, nullptr);
  vkDestroyDevice(device, nullptr);
}

Result<Device::Impl::Slot> Device::Impl::make_slot(size_t bytes, bool host_visible, std::string_view what) {
  bytes = std::max<size_t>(16, (bytes + 15) & ~size_t{15});
  auto no_room = [&] {
    const uint64_t left = info.memory_bytes > in_use ? info.memory_bytes - in_use : 0;
    return Status::error("device " + info.name + " has no room for " + std::string(what) + ": " +
                         std::to_string(bytes) + " bytes asked for, about " + std::to_string(left) +
                         " of its " + std::to_string(info.memory_bytes) + " left");
  };
  if (!host_visible && info.memory_bytes > 0 && in_use + bytes > info.memory_bytes) return no_room();
  Slot s;
  s.bytes = bytes;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (VkResult r = vkCreateBuffer(device, &bi, nullptr, &s.buffer); r != VK_SUCCESS)
    return Status::error(std::string(what) + ": " + vk_error("vkCreateBuffer", r));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device, s.buffer, &req);
  // Device-local first (host-visible too where there is such memory);
  // the staging buffer wants host-visible, coherent memory.
  auto pick = [&](VkMemoryPropertyFlags want) -> int {
    for (uint32_t i = 0; i < memory.memoryTypeCount; ++i)
      if ((req.memoryTypeBits & (1u << i)) && (memory.memoryTypes[i].propertyFlags & want) == want) return static_cast<int>(i);
    return -1;
  };
  const VkMemoryPropertyFlags visible = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  // Memory types in the order tried. A discrete card's device-local,
  // host-visible type is often a 256 MiB window (without resizable BAR):
  // when it is full, plain device-local memory takes the rest.
  std::vector<int> types;
  for (VkMemoryPropertyFlags want :
       host_visible ? std::vector<VkMemoryPropertyFlags>{visible}
                    : std::vector<VkMemoryPropertyFlags>{VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | visible,
                                                         VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0})
    if (int t = pick(want); t >= 0 && std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
  VkResult r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  int type = -1;
  for (int t : types) {
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = static_cast<uint32_t>(t);
    r = vkAllocateMemory(device, &ai, nullptr, &s.memory);
    if (r == VK_SUCCESS) {
      type = t;
      break;
    }
  }
  if (type < 0) {
    vkDestroyBuffer(device, s.buffer, nullptr);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) return no_room();
    return Status::error(std::string(what) + ": " + vk_error("vkAllocateMemory", r));
  }
  vkBindBufferMemory(device, s.buffer, s.memory, 0);
  if ((memory.memoryTypes[type].propertyFlags & visible) == visible)
    vkMapMemory(device, s.memory, 0, VK_WHOLE_SIZE, 0, &s.mapped);
  return s;
}

void Device::Impl::free_slot(Slot& s) {
  if (s.buffer) vkDestroyBuffer(device, s.buffer, nullptr);
  if (s.memory) vkFreeMemory(device, s.memory, nullptr);
  s = Slot{};
}

Result<const Device::Impl::Kernel*> Device::Impl::kernel(std::string_view name) {
  if (auto it = kernels.find(name); it != kernels.end()) return &it->second;
  std::span<const uint32_t> code;
  if (subgroups) code = shader_code(std::string(name) + "_subgroups");
  if (code.empty()) code = shader_code(name);
  if (code.empty()) return Status::error("no shader named " + std::string(name) + " in this build");
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = code.size() * sizeof(uint32_t);
  mi.pCode = code.data();
  VkShaderModule module;
  if (VkResult r = vkCreateShaderModule(device, &mi, nullptr, &module); r != VK_SUCCESS)
    return Status::error(std::string(name) + ": " + vk_error("vkCreateShaderModule", r));
  VkComputePipelineCreateInfo pi{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  pi.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  pi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pi.stage.module = module;
  pi.stage.pName = "main";
  pi.layout = layout;
  Kernel k{set_layout, layout, VK_NULL_HANDLE};
  VkResult r = vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &pi, nullptr, &k.pipeline);
  vkDestroyShaderModule(device, module, nullptr);
  if (r != VK_SUCCESS) return Status::error(std::string(name) + ": " + vk_error("vkCreateComputePipelines", r));
  return &kernels.emplace(std::string(name), k).first->second;
}

Status Device::Impl::submit_and_wait() {
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &commands;
  vkResetFences(device, 1, &fence);
  if (VkResult r = vkQueueSubmit(queue, 1, &si, fence); r != VK_SUCCESS) return Status::error(vk_error("vkQueueSubmit", r));
  if (VkResult r = vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX); r != VK_SUCCESS)
    return Status::error(vk_error("vkWaitForFences", r) + (r == VK_ERROR_DEVICE_LOST ? ": the device was lost" : ""));
  return {};
}

Status Device::Impl::copy(VkBuffer src, VkBuffer dst, size_t src_offset, size_t dst_offset, size_t bytes) {
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vkBeginCommandBuffer(commands, &bi);
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(commands, src, dst, 1, &region);
  vkEndCommandBuffer(commands);
  return submit_and_wait();
}

Status Device::Impl::make_staging() {
  if (staging.buffer) return {};
  auto made = make_slot(kStagingBytes, true, "the staging buffer");
  if (!made.ok()) return made.status();
  staging = *made;
  return {};
}

Device::Device(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Device::~Device() = default;

Result<std::unique_ptr<Device>> Device::open(int index, DeviceOptions options) {
  auto devices = physical_devices();
  if (!devices.ok()) return devices.status();
  if (index < 0 || index >= static_cast<int>(devices->size()))
    return Status::error("--device vulkan:" + std::to_string(index) + ": Vulkan sees " +
                         std::to_string(devices->size()) + " device(s) (revis devices lists them)");
  auto impl = std::make_unique<Impl>();
  impl->physical = (*devices)[index];
  impl->info = describe(impl->physical, index);
  impl->subgroups = options.subgroups && impl->info.subgroup_arithmetic;
  if (!has_extension(impl->physical, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME))
    return Status::error(impl->info.name + ": lacks " VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME ", which revis needs");
  vkGetPhysicalDeviceMemoryProperties(impl->physical, &impl->memory);

  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(impl->physical, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(impl->physical, &n, families.data());
  bool found = false;
  for (uint32_t i = 0; i < n && !found; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) impl->queue_family = i, found = true;
  if (!found) return Status::error(impl->info.name + ": has no compute queue");

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = impl->queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  const char* extensions[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = 1;
  di.ppEnabledExtensionNames = extensions;
  if (VkResult r = vkCreateDevice(impl->physical, &di, nullptr, &impl->device); r != VK_SUCCESS)
    return Status::error(impl->info.name + ": " + vk_error("vkCreateDevice", r));
  vkGetDeviceQueue(impl->device, impl->queue_family, 0, &impl->queue);
  impl->push_descriptors =
      reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(vkGetDeviceProcAddr(impl->device, "vkCmdPushDescriptorSetKHR"));

  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = impl->queue_family;
  vkCreateCommandPool(impl->device, &pi, nullptr, &impl->pool);
  VkCommandBufferAllocateInfo ci{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ci.commandPool = impl->pool;
  ci.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ci.commandBufferCount = 1;
  vkAllocateCommandBuffers(impl->device, &ci, &impl->commands);
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  vkCreateFence(impl->device, &fi, nullptr, &impl->fence);

  VkDescriptorSetLayoutBinding bindings[kMaxBindings];
  for (uint32_t b = 0; b < kMaxBindings; ++b)
    bindings[b] = {b, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  li.bindingCount = kMaxBindings;
  li.pBindings = bindings;
  vkCreateDescriptorSetLayout(impl->device, &li, nullptr, &impl->set_layout);
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, 128};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &impl->set_layout;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &range;
  vkCreatePipelineLayout(impl->device, &pli, nullptr, &impl->layout);
  return std::unique_ptr<Device>(new Device(std::move(impl)));
}

const DeviceInfo& Device::info() const { return impl_->info; }
uint64_t Device::bytes_in_use() const { return impl_->in_use; }
bool Device::uses_subgroups() const { return impl_->subgroups; }

Result<Buffer> Device::allocate(size_t bytes, std::string_view what) {
  if (impl_->info.max_buffer_bytes > 0 && bytes > impl_->info.max_buffer_bytes)
    return Status::error(std::string(what) + ": " + std::to_string(bytes) + " bytes, more than the " +
                         std::to_string(impl_->info.max_buffer_bytes) + " one binding of " + impl_->info.name +
                         " may address");
  auto slot = impl_->make_slot(bytes, false, what);
  if (!slot.ok()) return slot.status();
  uint32_t index;
  if (!impl_->free_slots.empty()) {
    index = impl_->free_slots.back();
    impl_->free_slots.pop_back();
    impl_->slots[index] = *slot;
  } else {
    index = static_cast<uint32_t>(impl_->slots.size());
    impl_->slots.push_back(*slot);
  }
  impl_->in_use += slot->bytes;
  Buffer b;
  b.device_ = this;
  b.slot_ = index;
  b.bytes_ = slot->bytes;
  return b;
}

void Device::release(uint32_t slot) {
  impl_->in_use -= impl_->slots[slot].bytes;
  vkDeviceWaitIdle(impl_->device);
  impl_->free_slot(impl_->slots[slot]);
  impl_->free_slots.push_back(slot);
}

Status Device::write(Buffer& to, size_t offset, const void* data, size_t bytes) {
  if (offset + bytes > to.bytes()) return Status::error("gpu write past the end of a buffer");
  Impl::Slot& s = impl_->slots[to.slot_];
  if (s.mapped) {
    std::memcpy(static_cast<uint8_t*>(s.mapped) + offset, data, bytes);
    return {};
  }
  if (Status st = impl_->make_staging(); !st.ok()) return st;
  for (size_t done = 0; done < bytes; done += kStagingBytes) {
    const size_t part = std::min(kStagingBytes, bytes - done);
    std::memcpy(impl_->staging.mapped, static_cast<const uint8_t*>(data) + done, part);
    if (Status st = impl_->copy(impl_->staging.buffer, s.buffer, 0, offset + done, part); !st.ok()) return st;
  }
  return {};
}

Status Device::read(const Buffer& from, size_t offset, void* data, size_t bytes) {
  if (offset + bytes > from.bytes()) return Status::error("gpu read past the end of a buffer");
  Impl::Slot& s = impl_->slots[from.slot_];
  if (s.mapped) {
    std::memcpy(data, static_cast<const uint8_t*>(s.mapped) + offset, bytes);
    return {};
  }
  if (Status st = impl_->make_staging(); !st.ok()) return st;
  for (size_t done = 0; done < bytes; done += kStagingBytes) {
    const size_t part = std::min(kStagingBytes, bytes - done);
    if (Status st = impl_->copy(s.buffer, impl_->staging.buffer, offset + done, 0, part); !st.ok()) return st;
    std::memcpy(static_cast<uint8_t*>(data) + done, impl_->staging.mapped, part);
  }
  return {};
}

void Device::begin() {
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vkBeginCommandBuffer(impl_->commands, &bi);
  impl_->recording = true;
  impl_->record_error.clear();
}

void Device::dispatch(std::string_view kernel, std::initializer_list<const Buffer*> bindings, const void* push,
                      size_t push_bytes, uint32_t x, uint32_t y, uint32_t z) {
  if (!impl_->record_error.empty()) return;
  auto k = impl_->kernel(kernel);
  if (!k.ok()) {
    impl_->record_error = k.status().message();
    return;
  }
  if (bindings.size() > kMaxBindings || push_bytes > 128) {
    impl_->record_error = std::string(kernel) + ": too many bindings or push constants";
    return;
  }
  VkCommandBuffer cb = impl_->commands;
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, (*k)->pipeline);
  VkDescriptorBufferInfo infos[kMaxBindings];
  VkWriteDescriptorSet writes[kMaxBindings];
  uint32_t n = 0;
  for (const Buffer* b : bindings) {
    infos[n] = {impl_->slots[b->slot_].buffer, 0, VK_WHOLE_SIZE};
    writes[n] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[n].dstBinding = n;
    writes[n].descriptorCount = 1;
    writes[n].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[n].pBufferInfo = &infos[n];
    ++n;
  }
  impl_->push_descriptors(cb, VK_PIPELINE_BIND_POINT_COMPUTE, impl_->layout, 0, n, writes);
  if (push_bytes > 0) vkCmdPushConstants(cb, impl_->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<uint32_t>(push_bytes), push);
  vkCmdDispatch(cb, x, y, z);
  // Every dispatch reads what the ones before it wrote.
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0,
                       nullptr, 0, nullptr);
}

Status Device::run() {
  vkEndCommandBuffer(impl_->commands);
  impl_->recording = false;
  if (!impl_->record_error.empty()) return Status::error(impl_->record_error);
  return impl_->submit_and_wait();
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (device_) device_->release(slot_);
    device_ = other.device_;
    slot_ = other.slot_;
    bytes_ = other.bytes_;
    other.device_ = nullptr;
  }
  return *this;
}

Buffer::~Buffer() {
  if (device_) device_->release(slot_);
}

}  // namespace revis::gpu
