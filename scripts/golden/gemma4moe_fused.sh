#!/usr/bin/env bash
# Makes tests/testdata/gemma4moe-fused: a Q8_0 gemma4 MoE file in two
# forms of the published files: gate and up experts in one ffn_gate_up_exps
# tensor per layer, and one feed_forward_length per layer (the last layer,
# which shares caches, twice as wide); 4 layers, 8 experts of 32, 2 used.
# With llama.cpp's golden outputs on it for the shared prompts en and code,
# under 3 MB in all.
#   scripts/golden/gemma4moe_fused.sh REVIS_BINARY [LLAMA_DIR] [TESTDATA_DIR]
# Needs scripts/golden/build.sh run first (LLAMA_DIR, default /tmp/llamacpp).
set -euo pipefail
SET_TYPES=Q8_0 SET_PROMPTS="en code" exec "$(dirname "$0")/synthetic_set.sh" gemma4moe-fused "$1" \
  "${2:-/tmp/llamacpp}" "${3:-/work/shared/testdata}" \
  --arch gemma4 --layers 4 --shared-kv-layers 1 --experts 8 --experts-used 2 --ff-expert 32 --fused-gate-up \
  --double-wide-ffn \
  --softcap 30 --seed 1
