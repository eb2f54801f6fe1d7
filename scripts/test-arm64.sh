#!/usr/bin/env bash
# The AArch64 build (NEON kernels), cross compiled with Debian's
# aarch64-linux-gnu toolchain and run under QEMU user-mode emulation, so that
# an x86-64 machine (CI included) tests what Apple Silicon and ARM64 Linux run:
#   build-arm64          baseline ARMv8.0, integer dots by widening multiplies:
#                        test_quant in full and test_model (the golden tests
#                        against llama.cpp included) run. The node, fabric
#                        and CLI hold no architecture-specific code and are
#                        not cross built: that would double this stage.
#   build-arm64-dotprod  -march=armv8.2-a+dotprod, integer dots by SDOT as on
#                        Apple M1 and later: the NEON kernel tests of test_quant.
# Each test run asserts that the NEON backend is the one in use and prints it.
# Packages: scripts/install-deps.sh. Toolchain: cmake/aarch64-linux-gnu.cmake,
# whose CMAKE_CROSSCOMPILING_EMULATOR also lets ctest run these binaries.
# Needs ../shared/testdata beside the repository (or REVIS_TESTDATA_DIR).
#
#   scripts/test-arm64.sh        golden tests on the `en` prompt of every model
#                                file: all 5 architectures x all 5 file types
#                                (F16, Q8_0, Q4_0, Q4_K_M = Q4_K + Q6_K, Q6_K)
#   scripts/test-arm64.sh --all  every golden case (85 instead of 25: the
#                                longer prompts make it about 7 times as
#                                long under QEMU, too long for every CI run)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
testdata=${REVIS_TESTDATA_DIR:-$PWD/../shared/testdata}
all_golden=false
[[ ${1:-} == --all ]] && all_golden=true
start=$SECONDS
elapsed() { printf '%dm%02ds' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }

if [[ $(uname -m) == aarch64 ]]; then
  echo "== arm64: this machine is AArch64; its native build already runs the NEON kernels, skipped"
  exit 0
fi
for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  if ! command -v "$tool" >/dev/null; then
    echo "test-arm64: $tool not found; run scripts/install-deps.sh" >&2
    exit 1
  fi
done

configure() {  # build directory, extra cmake arguments...
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" -DREVIS_TESTDATA_DIR="$testdata" "$@" >/dev/null
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# A stuck emulated binary (a hang only under QEMU, say) fails the stage
# instead of holding CI until its overall limit.
emulate() { timeout 1800 qemu-aarch64 "$@"; }

# Waits for the test binary started as pids[NAME], whose output went to
# $logs/NAME; prints its summary (all of it on failure). Returns its status.
report() {  # name
  local name=$1 status=0
  wait "${pids[$name]}" || status=$?
  grep -E '^kernel backend' "$logs/$name" | sort -u | sed "s/^/$name: /" || true
  if ((status == 0)); then
    grep -E '^\[  PASSED  \]|tests? from .* ran' "$logs/$name" | sed "s/^/$name: /"
  else
    echo "$name FAILED (exit $status):"
    grep -vE '^\[ +(RUN|OK) +\]' "$logs/$name"
  fi
  return "$status"
}
declare -A pids

echo "== arm64: cross build (baseline ARMv8.0)"
configure build-arm64
cmake --build build-arm64 -j"$jobs" --target test_quant test_model
echo "arm64: built in $(elapsed)"

# The golden cases share a process per binary (the engine caches each model
# across its three tests), and the two binaries run side by side. The
# scalar backend's golden and chunking runs (OtherBackends/, Chunking's
# scalar case) are left to the native x86 builds, which run the same scalar
# code in seconds. So are DeepSeek V4's long prompts, its cache and MTP
# tests and the quantization-mix tests: they take the NEON kernels through
# the paths the shorter cases take, and under emulation cost eight of the
# stage's minutes (every row through the single-token kernels, model.h).
model_filter='-AllCases/Golden.*_code:AllCases/Golden.*_ja:AllCases/Golden.*_long:OtherBackends/*:Backends/Chunking.*/scalar'
model_filter+=':AllCases/Deepseek4Golden.*_long*:Deepseek4Cache.*:Deepseek4Mtp.*:QuantizeMixes.*:QuantizeMoe*'
$all_golden && model_filter='*'
echo "== arm64: test_quant and test_model under qemu-aarch64 (golden: $($all_golden && echo 'all cases' || echo 'en prompts'))"
emulate build-arm64/test_quant >"$logs/test_quant" 2>&1 &
pids[test_quant]=$!
emulate build-arm64/test_model --gtest_filter="$model_filter" >"$logs/test_model" 2>&1 &
pids[test_model]=$!
# The dotprod tree builds while the two binaries above run (test_model's
# emulated run takes minutes), instead of after them: the build takes up
# whatever CPU the emulated tests leave. Their output goes to their logs, so
# the build's output stays readable; a failed build is reported once the
# tests above have been reported too.
failed=0
echo "== arm64: dotprod build (ARMv8.2-A + dot product, as Apple M1+), while the tests above run"
if configure build-arm64-dotprod -DCMAKE_CXX_FLAGS=-march=armv8.2-a+dotprod &&
  cmake --build build-arm64-dotprod -j"$jobs" --target test_quant; then
  echo "arm64: dotprod built at $(elapsed)"
  echo "== arm64: dotprod NEON kernel tests under qemu-aarch64"
  emulate build-arm64-dotprod/test_quant --gtest_filter='*Neon*' >"$logs/test_quant_dotprod" 2>&1 &
  pids[test_quant_dotprod]=$!
else
  echo "arm64: dotprod build FAILED"
  failed=1
fi
report test_quant || failed=1
[[ -v pids[test_quant_dotprod] ]] && { report test_quant_dotprod || failed=1; }
report test_model || failed=1
echo "arm64: tests done at $(elapsed)"

echo "arm64: $( ((failed)) && echo FAILED || echo passed ) in $(elapsed)"
exit "$failed"
