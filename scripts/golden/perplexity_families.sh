#!/usr/bin/env bash
# llama-perplexity and revis perplexity on the small file `revis mkmodel
# --arch NAME --type MIX` writes for each newer architecture, over the
# shared trained/valid.txt at one -c and --chunks. The files are made here
# exactly as tests/cli/perplexity_families_test.cpp makes them, and that
# test holds the llama.cpp figures printed here. MOE-2BIT needs an
# importance matrix: `revis imatrix` over the same text on the F16 file.
#   scripts/golden/perplexity_families.sh REVIS_BINARY [LLAMA_DIR] [TESTDATA_DIR]
# LLAMA_DIR (default /tmp/llamacpp) must hold build/bin/llama-perplexity.
set -euo pipefail
revis=$1
ppl=${2:-/tmp/llamacpp}/build/bin/llama-perplexity
text=${3:-/work/shared/testdata}/trained/valid.txt
settings=(-c 128 --chunks 8)
cases=("gpt-oss MXFP4_MOE" "gemma3 Q8_0" "gemma3 Q4_K_M" "gemma4 Q8_0" "qwen35 Q8_0" "qwen35moe Q8_0"
  "qwen3next Q8_0" "deepseek4 Q8_0" "deepseek4 MOE-2BIT")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# llama-perplexity's "Final estimate" (its logger can drop its last lines at exit: tried up to 5 times).
llama() {
  local figure=""
  for _ in 1 2 3 4 5; do
    figure=$("$ppl" -m "$1" -f "$text" -t 2 "${settings[@]}" 2>&1 | grep -a -o 'Final estimate: PPL = [0-9.]*' |
      awk '{print $5}')
    [ -n "$figure" ] && break
  done
  echo "$figure"
}
ours() { "$revis" perplexity -m "$1" -f "$text" -t 2 "${settings[@]}" 2>/dev/null | awk '/^perplexity /{print $2}'; }
printf '%-10s %-10s %16s %16s %9s\n' arch mix llama.cpp revis revis/llama
for c in "${cases[@]}"; do
  read -r arch mix <<<"$c"
  file=$work/$arch-$mix.gguf
  if [[ $mix == MOE-2BIT ]]; then
    "$revis" mkmodel --arch "$arch" --type F16 -o "$work/$arch-F16.gguf" >/dev/null 2>&1
    "$revis" imatrix -m "$work/$arch-F16.gguf" -f "$text" "${settings[@]}" -o "$work/$arch.imatrix" >/dev/null 2>&1
    "$revis" quantize --imatrix "$work/$arch.imatrix" "$work/$arch-F16.gguf" "$file" "$mix" >/dev/null 2>&1
  else
    "$revis" mkmodel --arch "$arch" --type "$mix" -o "$file" >/dev/null 2>&1
  fi
  a=$(llama "$file") b=$(ours "$file")
  printf '%-10s %-10s %16s %16s %+8.3f%%\n' "$arch" "$mix" "$a" "$b" "$(python3 -c "print(($b / $a - 1) * 100)")"
done
