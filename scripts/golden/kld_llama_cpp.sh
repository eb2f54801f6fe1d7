#!/usr/bin/env bash
# Makes tests/testdata/kld: KL-divergence base files written by llama.cpp's
# llama-perplexity (its own layout, which `revis perplexity --kl-divergence`
# reads), and prints llama.cpp's figures for them that the README records.
#   scripts/golden/kld_llama_cpp.sh [LLAMA_DIR] [TESTDATA_DIR]
# LLAMA_DIR (default /tmp/llamacpp) must hold build/bin/llama-perplexity:
# scripts/golden/build.sh, then cmake --build LLAMA_DIR/build --target llama-perplexity.
set -euo pipefail
ppl=${1:-/tmp/llamacpp}/build/bin/llama-perplexity
data=${2:-/work/shared/testdata}
out=$(cd "$(dirname "$0")/../.." && pwd)/tests/testdata/kld
mkdir -p "$out"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# llama-perplexity's figures (its logger can drop its last lines at exit: rerun if a chunk is missing).
# With fewer than 100 positions it prints no summary: its last per-chunk line is the total so far.
run() { "$ppl" "$@" -t 2 >"$log" 2>&1; grep -a -E 'Final estimate|^ +[0-9]+ +[0-9.]+ ±|Mean PPL|Mean +KLD|Same top p' "$log" || true; }

# The trained model: no BOS, vocabulary 2048, 4 chunks of 64 tokens (124 positions scored).
run -m "$data/trained/models/fortune-F16.gguf" -f "$data/trained/valid.txt" -c 64 --chunks 4 \
  --kl-divergence-base "$out/fortune-F16.c64.kld"
for type in F16 Q4_K_M; do
  echo "fortune-$type against fortune-F16.c64.kld:"
  run -m "$data/trained/models/fortune-$type.gguf" -c 64 --kl-divergence-base "$out/fortune-F16.c64.kld" \
    --kl-divergence
done

# A model that adds BOS (Llama 2's vocabulary of 1024, random weights): 2 chunks of 32 tokens.
run -m "$data/models/llama-spm-F16.gguf" -f "$data/trained/valid.txt" -c 32 --chunks 2 \
  --kl-divergence-base "$out/llama-spm-F16.c32.kld"
for type in F16 Q8_0; do
  echo "llama-spm-$type against llama-spm-F16.c32.kld:"
  run -m "$data/models/llama-spm-$type.gguf" -c 32 --kl-divergence-base "$out/llama-spm-F16.c32.kld" \
    --kl-divergence
done
ls -l "$out"/*.kld
