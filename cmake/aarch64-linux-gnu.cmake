# Cross compiling revis for 64-bit ARM Linux on a Debian x86-64 host, with the
# tests run under user-mode QEMU. scripts/test-arm64.sh uses it; the packages
# it needs are installed by scripts/install-deps.sh:
#   g++-aarch64-linux-gnu, qemu-user, and the :arm64 (multiarch) builds of
#   the libraries revis links (libpcre2-dev, libgtest-dev, libgmock-dev).
# nlohmann-json and CLI11 are header-only, architecture "all": the host's
# copies under /usr/share/cmake serve both.
#
#   cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(REVIS_CROSS_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${REVIS_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${REVIS_CROSS_TRIPLE}-g++)

# Debian's cross compiler already searches the multiarch directories
# (/usr/include/aarch64-linux-gnu, /usr/lib/aarch64-linux-gnu) where the
# :arm64 -dev packages put their files. CMake's own find_* calls must be
# told: libraries only from the arm64 directories (never the host's x86-64
# ones under /usr/lib), config packages from both the arm64 directory and
# the architecture-independent /usr/share/cmake, programs from the host.
set(CMAKE_LIBRARY_ARCHITECTURE ${REVIS_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH /usr/${REVIS_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu)

# pkg-config (used for PCRE2) must read the arm64 .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${REVIS_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# try_run, gtest_discover_tests and ctest start target binaries through this.
# QEMU runs them with the arm64 loader and C library of the multiarch
# libc6:arm64 (/lib/ld-linux-aarch64.so.1, /lib/aarch64-linux-gnu), which the
# :arm64 -dev packages above depend on, so it is always there beside them.
# Not `-L /usr/aarch64-linux-gnu`: that tree holds the cross toolchain's own
# copy of glibc, whose loader still searches the multiarch directories first
# and so pairs itself with the multiarch libc.so.6. Debian updates the two
# packages separately; when their revisions differ (2.36-8 beside
# 2.36-9+deb12u14 on Debian 12 today) the mix hangs in the first
# pthread_create.
find_program(REVIS_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${REVIS_QEMU_AARCH64})
