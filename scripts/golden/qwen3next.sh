#!/usr/bin/env bash
# Makes tests/testdata/qwen3next: two synthetic qwen3next files (revis mkmodel:
# every matrix F16, or Q8_0, from the same float weights) and llama.cpp's
# golden outputs on them for the shared prompts.
#   scripts/golden/qwen3next.sh REVIS_BINARY [LLAMA_DIR] [TESTDATA_DIR]
# Needs scripts/golden/build.sh run first (LLAMA_DIR, default /tmp/llamacpp).
set -euo pipefail
exec "$(dirname "$0")/synthetic_set.sh" qwen3next "$1" "${2:-/tmp/llamacpp}" "${3:-/work/shared/testdata}" \
  --arch qwen3next --seed 1
