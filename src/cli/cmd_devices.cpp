// revis devices: the GPUs Vulkan sees, the N of --device vulkan:N (name,
// type, memory, subgroup size, 16-bit and cooperative-matrix support);
// with --json one object per device.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "gpu/device.h"

namespace revis::cli {

void register_devices(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("devices", "List the GPUs Vulkan sees (for --device vulkan:N)");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print a JSON array, one object per device");
  cmd->callback([json, &exit_code] {
    auto devices = gpu::list_devices();
    if (!devices.ok()) {
      exit_code = fail(devices.status().message());
      return;
    }
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const gpu::DeviceInfo& d : *devices)
        out.push_back({{"device", "vulkan:" + std::to_string(d.index)}, {"name", d.name}, {"type", d.type},
                       {"driver", d.driver}, {"memory_bytes", d.memory_bytes},
                       {"max_buffer_bytes", d.max_buffer_bytes}, {"subgroup_size", d.subgroup_size},
                       {"subgroup_arithmetic", d.subgroup_arithmetic},
                       {"float16", d.float16}, {"storage16", d.storage16},
                       {"cooperative_matrix", d.cooperative_matrix}});
      std::printf("%s\n", out.dump(2).c_str());
    } else if (devices->empty()) {
      std::printf("Vulkan sees no device\n");
    } else {
      for (const gpu::DeviceInfo& d : *devices)
        std::printf("vulkan:%d  %s (%s)  %.1f GiB  subgroup %u%s  fp16 %s  coopmat %s  %s\n", d.index, d.name.c_str(),
                    d.type.c_str(), d.memory_bytes / 1073741824.0, d.subgroup_size,
                    d.subgroup_arithmetic ? " (reductions)" : "", d.float16 ? "yes" : "no",
                    d.cooperative_matrix ? "yes" : "no", d.driver.c_str());
    }
    exit_code = 0;
  });
}

}  // namespace revis::cli
