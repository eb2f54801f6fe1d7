#!/usr/bin/env bash
# Makes tests/testdata/gemma4: two synthetic gemma4 files (revis mkmodel;
# the Q8_0 one quantized by mkmodel itself, from the same float weights)
# and llama.cpp's golden outputs on them for the shared prompts.
#   scripts/golden/gemma4.sh REVIS_BINARY [LLAMA_DIR] [TESTDATA_DIR]
# Needs scripts/golden/build.sh run first (LLAMA_DIR, default /tmp/llamacpp).
set -euo pipefail
exec "$(dirname "$0")/synthetic_set.sh" gemma4 "$1" "${2:-/tmp/llamacpp}" "${3:-/work/shared/testdata}" \
  --arch gemma4 --softcap 30 --seed 1
