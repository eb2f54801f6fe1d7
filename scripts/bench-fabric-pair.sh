#!/usr/bin/env bash
# Throughput of one node against two on a real model: every node pinned to a
# core of its own (taskset) with one thread; the same tickets go through
# `revis batch` to the first node, which in the two-node runs dispatches to
# the second as its peer. Prints tickets/s for each (the median of RUNS)
# and their ratio. A benchmark: it asserts nothing.
#
#   scripts/bench-fabric-pair.sh [MODEL.gguf]
#   TICKETS=12 RUNS=3 MAX_TOKENS=32 REVIS=build/revis scripts/bench-fabric-pair.sh model.gguf
#
# Without MODEL it writes (once) a model with the tensor shapes and types of
# Qwen3-0.6B in Q4_0 under ${XDG_CACHE_HOME:-~/.cache}/revis: random
# weights, so the text is meaningless, but each token costs what it would
# on the real model. Both nodes share one machine's memory bandwidth, so the
# ratio here is a lower bound of what two machines give; on a machine where
# others are working it moves with their load.
set -euo pipefail
cd "$(dirname "$0")/.."
revis=${REVIS:-build/revis}
tickets=${TICKETS:-12}
runs=${RUNS:-3}
max_tokens=${MAX_TOKENS:-32}
[[ -x $revis ]] || { echo "error: $revis not found (build first, or set REVIS)" >&2; exit 1; }
(($(nproc) >= 2)) || { echo "error: needs two cores, this machine has $(nproc)" >&2; exit 1; }

model=${1:-}
if [[ -z $model ]]; then
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/revis
  model=$cache/bench-qwen3-0.6b-Q4_0.gguf
  if [[ ! -f $model ]]; then
    mkdir -p "$cache"
    "$revis" mkmodel --like qwen3-0.6b --type Q4_0 -o "$model"  # written to a temporary name, then renamed
  fi
fi
[[ -f $model ]] || { echo "error: $model not found" >&2; exit 1; }

work=$(mktemp -d)
pids=()
stop_nodes() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
trap 'stop_nodes; rm -rf "$work"' EXIT

# Greedy decoding: every run generates the same tokens.
cat >"$work/tasks.toml" <<EOF
[tasks.bench]
tier = "small"
user = "{{text}}"
required = ["text"]
temperature = 0
max_tokens = $max_tokens
EOF
for i in $(seq 1 "$tickets"); do
  printf '{"taskType":"bench","args":{"text":"Write a short note about item %d."}}\n' "$i"
done >"$work/tickets.jsonl"

# start_node NAME CORE [serve flags...]: pinned, one thread; log in $work/NAME.log.
start_node() {
  local name=$1 core=$2; shift 2
  taskset -c "$core" "$revis" serve -m "$model" -t 1 -c 512 --catalog "$work/tasks.toml" --name "$name" --port 0 "$@" \
    2>"$work/$name.log" >/dev/null &
  pids+=($!)
}
wait_port() {
  local log=$work/$1.log
  for _ in $(seq 1 3000); do
    if grep -qE ' info +ready$' "$log" 2>/dev/null; then
      sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n 1
      return 0
    fi
    grep -q ' error ' "$log" 2>/dev/null && break
    sleep 0.1
  done
  echo "error: node $1 did not start:" >&2
  cat "$log" >&2
  return 1
}
# Tickets per second of one batch through the node on $1.
batch_rate() {
  "$revis" batch "$work/tickets.jsonl" --node "127.0.0.1:$1" --concurrency 4 -o "$work/results.jsonl" \
    --summary "$work/summary.json" 2>"$work/batch.err" || { cat "$work/batch.err" >&2; exit 1; }
  grep -E '^(batch:|ran on:)' "$work/batch.err" | sed 's/^/    /' >&2
  sed -n 's/^ *"ticketsPerS": \([-0-9.e+]*\),\{0,1\}$/\1/p' "$work/summary.json"
}
# shellcheck source=bench-stats.sh
source scripts/bench-stats.sh  # median

one=() two=()
for run in $(seq 1 "$runs"); do
  echo "run $run/$runs: 1 node (core 0)" >&2
  start_node a 0
  one+=("$(batch_rate "$(wait_port a)")")
  stop_nodes
  echo "run $run/$runs: 2 nodes (cores 0 and 1)" >&2
  start_node b 1
  port_b=$(wait_port b)
  start_node a 0 --peer "127.0.0.1:$port_b"
  two+=("$(batch_rate "$(wait_port a)")")
  stop_nodes
done
r1=$(printf '%s\n' "${one[@]}" | median)
r2=$(printf '%s\n' "${two[@]}" | median)
awk -v r1="$r1" -v r2="$r2" -v m="$(basename "$model")" -v t="$tickets" -v n="$max_tokens" -v runs="$runs" 'BEGIN {
  printf "model %s, %d tickets of %d tokens, median of %d runs\n", m, t, n, runs
  printf "1 node:  %.3f tickets/s\n2 nodes: %.3f tickets/s\nratio 2/1: %.2f\n", r1, r2, r2 / r1
}'
