#!/usr/bin/env bash
# Makes tests/testdata/SET: synthetic files SET-F16.gguf and
# SET-Q8_0.gguf (revis mkmodel with FLAGS and --type F16 or Q8_0) and
# llama.cpp's golden outputs on them for the shared prompts.
#   scripts/golden/synthetic_set.sh SET REVIS_BINARY LLAMA_DIR TESTDATA_DIR FLAGS...
# SET_TYPES and SET_PROMPTS narrow the types (default "F16 Q8_0") and the
# prompts (default "en code ja long") for a set that must stay small.
# Needs scripts/golden/build.sh run first. gemma3.sh, gemma4.sh, gemma4moe.sh, gemma4wide.sh and gpt-oss.sh call it.
set -euo pipefail
set_name=$1
revis=$2
llama=$3
shared=$4
shift 4
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$repo/tests/testdata/$set_name
mkdir -p "$out/models" "$out/golden"
types=${SET_TYPES:-F16 Q8_0}
prompt_ids=${SET_PROMPTS:-en code ja long}
for type in $types; do
  "$revis" mkmodel "$@" --type "$type" \
    --vocab-from "$shared/models/llama-spm-F16.gguf" -o "$out/models/$set_name-$type.gguf"
done
prompts=$(mktemp -d)
python3 - "$shared/golden/prompts.json" "$prompts" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1])):
    open(f"{sys.argv[2]}/{p['id']}.txt", "w").write(p["text"])
PY
for type in $types; do
  for id in $prompt_ids; do
    "$llama/build/llama_golden" "$out/models/$set_name-$type.gguf" "$prompts/$id.txt" \
      "$out/golden/$set_name-$type.$id" 2> "$prompts/log"  || { cat "$prompts/log"; exit 1; }
  done
done
rm -r "$prompts"
ls -l "$out/models" "$out/golden"
