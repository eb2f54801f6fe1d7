#!/usr/bin/env bash
# Makes tests/testdata/gpt-oss: two synthetic gpt-oss files (revis mkmodel,
# experts in MXFP4, the rest F16 or Q8_0 from the same float weights) and
# llama.cpp's golden outputs on them for the shared prompts.
#   scripts/golden/gpt-oss.sh REVIS_BINARY [LLAMA_DIR] [TESTDATA_DIR]
# Needs scripts/golden/build.sh run first (LLAMA_DIR, default /tmp/llamacpp).
set -euo pipefail
revis=$1
llama=${2:-/tmp/llamacpp}
shared=${3:-/work/shared/testdata}
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$repo/tests/testdata/gpt-oss
mkdir -p "$out/models" "$out/golden"
for type in F16 Q8_0; do
  "$revis" mkmodel --arch gpt-oss --seed 2 --type "$type" \
    --vocab-from "$shared/models/llama-spm-F16.gguf" -o "$out/models/gpt-oss-$type.gguf"
done
prompts=$(mktemp -d)
python3 - "$shared/golden/prompts.json" "$prompts" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1])):
    open(f"{sys.argv[2]}/{p['id']}.txt", "w").write(p["text"])
PY
for type in F16 Q8_0; do
  for id in en code ja long; do
    "$llama/build/llama_golden" "$out/models/gpt-oss-$type.gguf" "$prompts/$id.txt" "$out/golden/gpt-oss-$type.$id" \
      2> "$prompts/log"  || { cat "$prompts/log"; exit 1; }
  done
done
rm -r "$prompts"
ls -l "$out/models" "$out/golden"
