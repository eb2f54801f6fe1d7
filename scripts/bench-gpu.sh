#!/usr/bin/env bash
# revis on a GPU (--device vulkan) against llama.cpp's Vulkan backend on the
# same files and the same card, in one run: the issue-41 measurement, to be
# run where a GPU is (the device tool lends one to some sessions; see
# docs/gpu.md). A benchmark: it asserts nothing.
#
#   scripts/bench-gpu.sh LLAMA_BENCH BANDWIDTH_GB_S
#   REVIS=build/revis MODELS=/tmp/gpu-models REPS=3 scripts/bench-gpu.sh ...
#
# LLAMA_BENCH is a llama-bench built with -DGGML_VULKAN=ON; BANDWIDTH_GB_S
# the card's memory bandwidth (H100 SXM: 3350, H200: 4800), the roofline's
# denominator. It writes the synthetic files (mkmodel: Llama-3.2-1B and
# Llama-3.1-8B shapes at Q4_K_M and Q8_0, a qwen3moe shape at Q4_K_M) to
# MODELS unless they are there, then per file: prefill 512 and generation
# 128 from both programs with every layer on the GPU (-ngl 99), and both at
# depth 8192; prints tok/s, the ratio, and generation's share of the
# roofline (tok/s x revis's weight bytes per token / bandwidth).
set -euo pipefail
llama_bench=${1:?usage: scripts/bench-gpu.sh LLAMA_BENCH BANDWIDTH_GB_S}
bandwidth=${2:?usage: scripts/bench-gpu.sh LLAMA_BENCH BANDWIDTH_GB_S}
revis=${REVIS:-build/revis}
models=${MODELS:-/tmp/gpu-models}
reps=${REPS:-3}
mkdir -p "$models"

make_model() {  # like type file
  [[ -f $3 ]] || "$revis" mkmodel --like "$1" --type "$2" -o "$3" >/dev/null
}
files=()
for like in llama-3.2-1b llama-3.1-8b; do
  for type in Q4_K_M Q8_0; do
    make_model "$like" "$type" "$models/$like-$type.gguf"
    files+=("$models/$like-$type.gguf")
  done
done
make_model qwen3-30b-a3b Q4_K_M "$models/qwen3-30b-a3b-Q4_K_M.gguf"
files+=("$models/qwen3-30b-a3b-Q4_K_M.gguf")

median_llama() {  # llama-bench arguments...: the median tok/s of its samples
  "$llama_bench" -ngl 99 -r "$reps" -o jsonl "$@" 2>/dev/null |
    python3 -c 'import json,sys,statistics; print(statistics.median(json.loads(l)["avg_ts"] for l in sys.stdin if l.strip()))'
}
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

printf '%-28s %10s %10s %10s %6s %10s %10s %6s %8s\n' file "device" "pp revis" "pp llama" ratio "tg revis" "tg llama" ratio "roofline"
for f in "${files[@]}"; do
  json=$("$revis" bench -m "$f" --device vulkan -ngl 99 -p 512 -n 128 -r "$reps" --json 2>/dev/null)
  pp=$(field '["prefill_tok_s"]' <<<"$json")
  tg=$(field '["gen_tok_s"]' <<<"$json")
  bytes=$(field '["bytes_per_token"]' <<<"$json")
  device=$(field '["device"]' <<<"$json")
  lpp=$(median_llama -m "$f" -p 512 -n 0)
  ltg=$(median_llama -m "$f" -p 0 -n 128)
  python3 - "$f" "$device" "$pp" "$lpp" "$tg" "$ltg" "$bytes" "$bandwidth" <<'PY'
import os, sys
f, device, pp, lpp, tg, ltg, b, bw = sys.argv[1:]
pp, lpp, tg, ltg, b, bw = map(float, (pp, lpp, tg, ltg, b, bw))
print(f"{os.path.basename(f)[:28]:<28} {device[:10]:>10} {pp:10.1f} {lpp:10.1f} {pp / lpp:6.2f} {tg:10.1f} {ltg:10.1f} "
      f"{tg / ltg:6.2f} {100 * tg * b / (bw * 1e9):7.1f}%")
PY
  depth=$("$revis" bench -m "$f" --device vulkan -ngl 99 -d 8192 -n 128 -r 1 --json 2>/dev/null)
  echo "  depth 8192: revis generation $(field '["gen_tok_s"]' <<<"$depth") tok/s," \
       "llama.cpp $(median_llama -m "$f" -p 0 -n 128 -d 8192) tok/s"
done
