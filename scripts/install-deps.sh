#!/usr/bin/env bash
# Installs what revis needs to build and test on Debian 12 (run as root or with sudo).
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config            # toolchain
  nlohmann-json3-dev libcli11-dev libpcre2-dev  # libraries revis links
  libboost-dev libtomlplusplus-dev            # the node: Asio/Beast (header-only), TOML config
  libssl-dev ca-certificates                  # revis pull: HTTPS to the Hugging Face hub, certificates checked
  libsqlite3-dev                              # the fabric's ticket journal
  libxxhash-dev                               # XXH3, the KV checkpoints' checksum
  libedit-dev                                 # revis chat: line editing and history (optional)
  libsystemd-dev systemd dpkg-dev             # sd_notify; systemd-analyze and cpack -G DEB for the package stage
  libvulkan-dev glslc                         # the Vulkan GPU backend: its loader, and the shader compiler
  mesa-vulkan-drivers                         # lavapipe, a Vulkan device on the CPU: the GPU tests run on it
  libgtest-dev libgmock-dev                   # tests
  curl                                        # scripts/hostile-requests.sh (a node test) speaks HTTP through it
  libavahi-client-dev avahi-daemon dbus       # revis serve --discover (mDNS), and the daemon its test talks to
  libnats-dev nats-server                     # revis serve --broker (NATS JetStream), and the server its tests start
  clang libclang-rt-14-dev                    # fuzzers (libFuzzer) and sanitizer runtimes
  chromium                                    # the dashboard's browser test (scripts/test-web.sh)
  # The arm64 (NEON) build of scripts/test-arm64.sh: cross compiler, user-mode
  # QEMU, and the arm64 builds of the libraries above that have compiled
  # parts or arch-specific CMake files (multiarch; the header-only ones with
  # architecture "all", nlohmann-json and CLI11, serve both). Keep the :arm64
  # list in step with the find_package()s in CMakeLists.txt
  # (but OpenSSL: the arm64 stage builds only the kernel and model tests).
  g++-aarch64-linux-gnu qemu-user
  libpcre2-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64 libboost-dev:arm64 libtomlplusplus-dev:arm64 libsqlite3-dev:arm64 libxxhash-dev:arm64
)
# The :arm64 packages need the architecture enabled before apt-get update.
dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Node.js runs the official `openai` npm client against the node in the tests
# (tests/node/npm_client.sh installs the packages itself). A Node.js that
# is already there (with its own npm) is kept.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm
fi
