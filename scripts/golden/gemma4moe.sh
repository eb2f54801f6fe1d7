#!/usr/bin/env bash
# Makes tests/testdata/gemma4moe: gemma4.sh's files with 8 experts (2 used)
# of 64 beside each layer's dense FFN, and llama.cpp's golden outputs on
# them for the shared prompts.
#   scripts/golden/gemma4moe.sh REVIS_BINARY [LLAMA_DIR] [TESTDATA_DIR]
# Needs scripts/golden/build.sh run first (LLAMA_DIR, default /tmp/llamacpp).
set -euo pipefail
exec "$(dirname "$0")/synthetic_set.sh" gemma4moe "$1" "${2:-/tmp/llamacpp}" "${3:-/work/shared/testdata}" \
  --arch gemma4 --experts 8 --experts-used 2 --ff-expert 64 --softcap 30 --seed 1
