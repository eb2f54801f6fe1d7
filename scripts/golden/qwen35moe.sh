#!/usr/bin/env bash
# Makes tests/testdata/qwen35moe: two synthetic qwen35moe files (revis mkmodel:
# every matrix F16, or Q8_0, from the same float weights) and llama.cpp's
# golden outputs on them for the shared prompts.
#   scripts/golden/qwen35moe.sh REVIS_BINARY [LLAMA_DIR] [TESTDATA_DIR]
# Needs scripts/golden/build.sh run first (LLAMA_DIR, default /tmp/llamacpp).
set -euo pipefail
exec "$(dirname "$0")/synthetic_set.sh" qwen35moe "$1" "${2:-/tmp/llamacpp}" "${3:-/work/shared/testdata}" \
  --arch qwen35moe --seed 1
