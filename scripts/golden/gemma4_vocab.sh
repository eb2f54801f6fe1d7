#!/usr/bin/env bash
# Makes tests/testdata/gemma4-vocab: a Gemma 4 style vocabulary (GPT-2's,
# respelled as Gemma 4's converter writes its own: raw UTF-8, U+2581 for a
# space, <0xNN> byte tokens, tokenizer.ggml.model "gemma4") and llama.cpp's
# token ids for the cases in ggml-vocab-gemma4.gguf.inp.
#   scripts/golden/gemma4_vocab.sh [LLAMA_DIR] [TESTDATA_DIR]
# Needs scripts/golden/build.sh run first (LLAMA_DIR, default /tmp/llamacpp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
llama=${1:-/tmp/llamacpp}
shared=${2:-/work/shared/testdata}
out=$here/../../tests/testdata/gemma4-vocab
g++ -O2 -std=c++17 "$here/gemma4_vocab.cpp" -I "$llama/include" -I "$llama/ggml/include" \
  -L "$llama/build/bin" -Wl,-rpath,"$llama/build/bin" -lllama -lggml -lggml-base -o "$llama/build/gemma4_vocab"
"$llama/build/gemma4_vocab" "$shared/vocab/ggml-vocab-gpt-2.gguf" "$out/ggml-vocab-gemma4.gguf.inp" \
  "$out/ggml-vocab-gemma4"
ls -l "$out"
