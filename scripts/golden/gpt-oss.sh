#!/usr/bin/env bash
# Makes tests/testdata/gpt-oss: two synthetic gpt-oss files (revis mkmodel:
# every matrix F16, or MXFP4 experts and the rest Q8_0, from the same float
# weights) and llama.cpp's golden outputs on them for the shared prompts.
#   scripts/golden/gpt-oss.sh REVIS_BINARY [LLAMA_DIR] [TESTDATA_DIR]
# Needs scripts/golden/build.sh run first (LLAMA_DIR, default /tmp/llamacpp).
set -euo pipefail
exec "$(dirname "$0")/synthetic_set.sh" gpt-oss "$1" "${2:-/tmp/llamacpp}" "${3:-/work/shared/testdata}" \
  --arch gpt-oss --seed 2
