// The GPU the gpu tests run on: device 0 of what Vulkan sees (lavapipe on
// CI, which installs mesa-vulkan-drivers). A build without Vulkan skips
// them; a build with Vulkan but no device fails them, saying what to install.
#pragma once

#include <gtest/gtest.h>

#include "gpu/device.h"

namespace revis::testing {

#define REVIS_REQUIRE_GPU()                                                                               \
  do {                                                                                                    \
    if (!gpu::built_with_vulkan()) GTEST_SKIP() << "built without Vulkan";                                \
    auto listed = gpu::list_devices();                                                                    \
    ASSERT_TRUE(listed.ok() && !listed->empty())                                                          \
        << "Vulkan sees no device (install mesa-vulkan-drivers for lavapipe): "                           \
        << (listed.ok() ? std::string("none listed") : listed.status().message());                        \
  } while (0)

}  // namespace revis::testing
