#!/usr/bin/env bash
# The test suite: the unit and golden tests (ctest) in a Release build, the
# same tests under AddressSanitizer + UndefinedBehaviorSanitizer, the AArch64
# (NEON) build's kernel and golden tests under QEMU (scripts/test-arm64.sh),
# and a bounded libFuzzer run of each parser when clang is present.
# Needs ../shared/testdata beside the repository (or REVIS_TESTDATA_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
testdata=${REVIS_TESTDATA_DIR:-$PWD/../shared/testdata}
fuzz_seconds=${REVIS_FUZZ_SECONDS:-60}

echo "== release build + tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DREVIS_TESTDATA_DIR="$testdata" >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build -j"$jobs" --output-on-failure

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build + tests"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREVIS_SANITIZE=ON \
  -DREVIS_TESTDATA_DIR="$testdata" >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure

echo "== AArch64 (NEON) cross build + tests under qemu-aarch64"
bash scripts/test-arm64.sh

if command -v clang++ >/dev/null; then
  echo "== fuzzing the GGUF reader, the tokenizer and the ticket parser, ${fuzz_seconds}s each"
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREVIS_FUZZ=ON \
    -DCMAKE_CXX_COMPILER=clang++ -DREVIS_TESTDATA_DIR="$testdata" >/dev/null
  cmake --build build-fuzz -j"$jobs"
  corpus=$(mktemp -d)
  trap 'rm -rf "$corpus"' EXIT
  mkdir -p "$corpus/gguf" "$corpus/tokenizer" "$corpus/ticket"
  cp "$testdata"/quant/*.gguf "$corpus/gguf/"
  cp "$testdata"/vocab/*.inp "$corpus/tokenizer/"
  build-fuzz/fuzz_gguf -max_total_time="$fuzz_seconds" -max_len=65536 "$corpus/gguf" 2>&1 | tail -n 3
  build-fuzz/fuzz_tokenizer -max_total_time="$fuzz_seconds" "$corpus/tokenizer" 2>&1 | tail -n 3
  printf '{"type":"ticket","ticketID":"t1","taskType":"summarize","isStreaming":true,"args":{"text":"hi"}}' \
    >"$corpus/ticket/seed.json"
  build-fuzz/fuzz_ticket -max_total_time="$fuzz_seconds" "$corpus/ticket" 2>&1 | tail -n 3
else
  echo "== clang++ not found: fuzzers skipped"
fi
