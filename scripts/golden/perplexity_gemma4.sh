#!/usr/bin/env bash
# llama-perplexity and revis perplexity on the gemma4 golden files
# (tests/testdata/gemma4) over the shared trained/valid.txt, at the -c and
# --chunks of tests/cli/perplexity_gemma4_test.cpp, whose constants are
# llama.cpp's figures printed here. The Q8_0 file is also scored by
# llama.cpp as an exactly dequantized F32 copy (revis quantize ... F32):
# llama.cpp's F32 products do not round the activations, so that figure
# is the Q8_0 weights' own perplexity, the referee of both engines.
#   scripts/golden/perplexity_gemma4.sh REVIS_BINARY [LLAMA_DIR] [TESTDATA_DIR]
# LLAMA_DIR (default /tmp/llamacpp) must hold build/bin/llama-perplexity.
set -euo pipefail
revis=$1
ppl=${2:-/tmp/llamacpp}/build/bin/llama-perplexity
text=${3:-/work/shared/testdata}/trained/valid.txt
models=$(cd "$(dirname "$0")/../.." && pwd)/tests/testdata/gemma4/models
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$revis" quantize "$models/gemma4-Q8_0.gguf" "$work/gemma4-Q8_0-as-F32.gguf" F32 >/dev/null 2>&1
# llama-perplexity's "Final estimate" (its logger can drop its last lines at exit: tried up to 5 times).
llama() {
  local figure=""
  for _ in 1 2 3 4 5; do
    figure=$("$ppl" -m "$1" -f "$text" -t 2 "${@:2}" 2>&1 | grep -a -o 'Final estimate: PPL = [0-9.]*' | awk '{print $5}')
    [ -n "$figure" ] && break
  done
  echo "$figure"
}
ours() { "$revis" perplexity -m "$1" -f "$text" -t 2 "${@:2}" 2>/dev/null | awk '/^perplexity /{print $2}'; }
printf '%-22s %-18s %20s %20s %9s\n' model settings llama.cpp revis revis/llama
for settings in "-c 64 --chunks 4" "-c 128 --chunks 8" "-c 256 --chunks 4"; do
  for model in "$models/gemma4-F16.gguf" "$models/gemma4-Q8_0.gguf" "$work/gemma4-Q8_0-as-F32.gguf"; do
    # shellcheck disable=SC2086
    a=$(llama "$model" $settings) b=$(ours "$model" $settings)
    printf '%-22s %-18s %20s %20s %+8.3f%%\n' "$(basename "$model" .gguf)" "$settings" "$a" "$b" \
      "$(python3 -c "print(($b / $a - 1) * 100)")"
  done
done
