#!/usr/bin/env bash
# Makes tests/testdata/gemma4wide: a synthetic gemma4 file in the published
# files' geometry (revis mkmodel: local layers' heads of 32 beside global
# ones of 64, a KV head count per layer) and llama.cpp's golden outputs on
# it for the shared prompts en and code (F16 only: the set stays small).
#   scripts/golden/gemma4wide.sh REVIS_BINARY [LLAMA_DIR] [TESTDATA_DIR]
# Needs scripts/golden/build.sh run first (LLAMA_DIR, default /tmp/llamacpp).
set -euo pipefail
SET_TYPES=F16 SET_PROMPTS="en code" exec "$(dirname "$0")/synthetic_set.sh" gemma4wide "$1" "${2:-/tmp/llamacpp}" \
  "${3:-/work/shared/testdata}" --arch gemma4 --softcap 30 --seed 2 --head-dim-swa 32 --layer-kv-heads 2,4,1,4,4,1
