#!/usr/bin/env bash
# Several streams at once, revis against llama.cpp, on one model file and
# one machine, in alternating rounds (both meet the same memory state and
# neighbours). revis: `revis bench --parallel LIST` (every stream through
# one GenerationBatch). llama.cpp: `llama-batched-bench -npl LIST` (its
# sequences share each batch too). Both: PROMPT random prompt tokens per
# stream, GEN greedy tokens per stream, THREADS threads. A benchmark: it
# asserts nothing.
#
#   scripts/bench-parallel.sh LLAMA_BATCHED_BENCH MODEL.gguf
#   ROUNDS=3 REPS=3 THREADS=2 PROMPT=64 GEN=128 STREAMS=1,2,4,8 REVIS=build/revis scripts/bench-parallel.sh ...
#
# Columns per stream count, medians over the rounds:
#   revis all    every stream's tokens over the wall time from the common
#                start (prefill included)
#   revis gen    streams x the median stream's generation tok/s: the rate
#                while they all decode
#   llama gen    llama-batched-bench's S_TG: generated tokens over the time
#                of its generation phase (all sequences decoding together)
#   llama all    its S: every prompt and generated token over the total time
#   gen ratio    revis gen / llama gen
# LLAMA_BATCHED_BENCH is llama.cpp's binary (build it yourself, e.g.
# scripts/golden/build.sh then `ninja -C BUILD llama-batched-bench`).
set -euo pipefail
cd "$(dirname "$0")/.."
revis=${REVIS:-build/revis}
rounds=${ROUNDS:-3}
reps=${REPS:-3}
threads=${THREADS:-2}
prompt=${PROMPT:-64}
gen=${GEN:-128}
streams=${STREAMS:-1,2,4,8}
(($# == 2)) || { sed -n '10,11p' "$0" | sed 's/^# //' >&2; exit 2; }
llama=$1 model=$2
[[ -x $revis ]] || { echo "error: $revis not found (build first, or set REVIS)" >&2; exit 1; }
[[ -x $llama ]] || { echo "error: $llama is not an executable llama-batched-bench" >&2; exit 1; }
[[ -f $model ]] || { echo "error: $model not found" >&2; exit 1; }
largest=${streams##*,}
ctx=$(((prompt + gen) * largest + 64))

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  echo "round $round/$rounds: revis" >&2
  "$revis" bench -m "$model" -t "$threads" -p "$prompt" -n "$gen" -r "$reps" --parallel "$streams" --json \
    2>/dev/null >"$tmp/revis.$round.json"
  echo "round $round/$rounds: llama-batched-bench" >&2
  for ((rep = 1; rep <= reps; ++rep)); do
    "$llama" -m "$model" -t "$threads" -c "$ctx" -npp "$prompt" -ntg "$gen" -npl "$streams" \
      --output-format jsonl 2>/dev/null >>"$tmp/llama.$round.jsonl"
  done
done

python3 - "$tmp" "$rounds" "$streams" <<'EOF'
import json, statistics, sys
tmp, rounds, streams = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")]
rows = {n: {"revis_all": [], "revis_gen": [], "llama_gen": [], "llama_all": []} for n in streams}
for r in range(1, rounds + 1):
    for row in json.load(open(f"{tmp}/revis.{r}.json"))["parallel"]:
        n = row["streams"]
        rows[n]["revis_all"].append(row["aggregate_tok_s"])
        rows[n]["revis_gen"].append(n * row["stream_tok_s"])
    by_n = {}
    for line in open(f"{tmp}/llama.{r}.jsonl"):
        if '"pl"' in line:
            j = json.loads(line)
            by_n.setdefault(j["pl"], []).append(j)
    for n, runs in by_n.items():
        rows[n]["llama_gen"].append(statistics.median(j["speed_tg"] for j in runs))
        rows[n]["llama_all"].append(statistics.median(j["speed"] for j in runs))
med = lambda v: statistics.median(v) if v else float("nan")
print(f"{'streams':>7} {'revis all':>10} {'revis gen':>10} {'llama gen':>10} {'llama all':>10} {'gen ratio':>9}")
for n in streams:
    r = {k: med(v) for k, v in rows[n].items()}
    print(f"{n:>7} {r['revis_all']:>10.2f} {r['revis_gen']:>10.2f} {r['llama_gen']:>10.2f} {r['llama_all']:>10.2f}"
          f" {r['revis_gen'] / r['llama_gen']:>8.2f}x")
EOF
