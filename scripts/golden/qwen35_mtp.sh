#!/usr/bin/env bash
# Makes tests/testdata/qwen35/mtp: a synthetic qwen35 file with an MTP
# block (revis mkmodel --nextn 1, every matrix F16) and llama.cpp's logits
# of that block over the shared `en` prompt (llama_mtp_golden.cpp).
#   scripts/golden/qwen35_mtp.sh REVIS_BINARY [LLAMA_DIR] [TESTDATA_DIR]
# Needs scripts/golden/build.sh run first (LLAMA_DIR, default /tmp/llamacpp).
set -euo pipefail
revis=$1
llama=${2:-/tmp/llamacpp}
shared=${3:-/work/shared/testdata}
out="$(cd "$(dirname "$0")/../.." && pwd)/tests/testdata/qwen35/mtp"
mkdir -p "$out"
"$revis" mkmodel --arch qwen35 --seed 1 --type F16 --nextn 1 --vocab-from "$shared/models/llama-spm-F16.gguf" \
  -o "$out/qwen35-mtp-F16.gguf"
prompt=$(mktemp)
python3 -c 'import json, sys
print(next(p["text"] for p in json.load(open(sys.argv[1])) if p["id"] == "en"), end="")' \
  "$shared/golden/prompts.json" > "$prompt"
"$llama/build/llama_mtp_golden" "$out/qwen35-mtp-F16.gguf" "$prompt" "$out/qwen35-mtp-F16.en" 2> "$prompt.log" ||
  { cat "$prompt.log"; exit 1; }
rm -f "$prompt" "$prompt.log"
echo "wrote $out"
