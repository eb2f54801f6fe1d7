#!/usr/bin/env bash
# Installs what revis needs to build and test on Debian 12 (run as root or with sudo).
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config            # toolchain
  nlohmann-json3-dev libcli11-dev libpcre2-dev  # libraries revis links
  libgtest-dev libgmock-dev                   # tests
  clang libclang-rt-14-dev                    # fuzzers (libFuzzer) and sanitizer runtimes
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
