#!/usr/bin/env bash
# DeepSeek V4 Flash's real shape, shrunk, against llama.cpp on the same
# files: `mkmodel --like deepseek-v4-flash` with a few blocks (every kind:
# raw, ratio 4 with the indexer, ratio 128) and fewer experts, at Q4_K_M
# and ds4's 2-bit mix, then scripts/bench-vs-llama-cpp.sh twice: prefill
# and generation from a short prompt, and both at a context depth, where
# the compressed attention matters. Rounds alternate the two programs, so
# each ratio comes from the same minutes. A benchmark: it asserts nothing.
#
#   scripts/bench-deepseek4.sh LLAMA_BENCH
#   DIR=/tmp/ds4like LAYERS=4 EXPERTS=32 TYPES="Q4_K_M MOE-2BIT" scripts/bench-deepseek4.sh LLAMA_BENCH
#   ROUNDS=3 PROMPT=512 GEN=32 (the short runs); DEPTH=16384 DEPTH_ROUNDS=2
#   DEPTH_GEN=16 (the deep ones; DEPTH=0 skips them); THREADS=2.
#   LLAMA_BATCHED_BENCH=PATH: llama.cpp's depth figures from one
#   llama-batched-bench run (scripts/bench-vs-llama-cpp.sh), half its time.
#
# Files are made once and kept in DIR (a few GB: 4 blocks of 32 experts are
# 2.8 GiB at Q4_K_M and 2.5 GiB at MOE-2BIT). Fewer experts than V4's 256
# leave what a token reads unchanged (6 routed and the shared one, the
# routers aside: `revis mkmodel --dry-run` prints both counts); prefill
# meets each expert with more tokens of a chunk.
set -euo pipefail
cd "$(dirname "$0")/.."
revis=${REVIS:-build/revis}
dir=${DIR:-/tmp/ds4like}
layers=${LAYERS:-4}
experts=${EXPERTS:-32}
read -r -a types <<<"${TYPES:-Q4_K_M MOE-2BIT}"
depth=${DEPTH:-16384}
(($# == 1)) || { sed -n '10,13p' "$0" | sed 's/^# //' >&2; exit 2; }
llama_bench=$1
[[ -x $revis ]] || { echo "error: $revis not found (build first, or set REVIS)" >&2; exit 1; }

mkdir -p "$dir"
models=()
for type in "${types[@]}"; do
  shape=(--like deepseek-v4-flash --layers "$layers" --experts "$experts" --type "$type")
  file=$dir/deepseek-v4-flash-${layers}L-${experts}e-$type.gguf
  [[ -f $file ]] || "$revis" mkmodel "${shape[@]}" -o "$file"
  echo "$(basename "$file"): $("$revis" mkmodel "${shape[@]}" --dry-run)"
  models+=("$file")
done
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"

DEPTH='' ROUNDS=${ROUNDS:-3} REPS=1 PROMPT=${PROMPT:-512} GEN=${GEN:-32} \
  scripts/bench-vs-llama-cpp.sh "$llama_bench" "${models[@]}"
if ((depth > 0)); then
  echo
  DEPTH=$depth ROUNDS=${DEPTH_ROUNDS:-2} REPS=1 GEN=${DEPTH_GEN:-16} \
    scripts/bench-vs-llama-cpp.sh "$llama_bench" "${models[@]}"
fi
echo "machine: load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
