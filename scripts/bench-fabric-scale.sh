#!/usr/bin/env bash
# The fabric at scale, on one machine: NODES simulated nodes (revis serve
# --engine sim: no model, tokens at a set rate), one of them accepting every
# ticket and knowing the others as peers, and TICKETS tickets sent through
# `revis batch`. A benchmark, not a test: it prints numbers, asserts nothing
# beyond every ticket finishing.
#
#   scripts/bench-fabric-scale.sh [NODES=50] [TICKETS=2000]
#   REVIS=build/revis SIM_TOKENS_PER_S=100 MAX_TOKENS=50 scripts/bench-fabric-scale.sh 50 2000
#
# Two runs over the same cluster:
#  1. dispatch overhead: at most NODES tickets in flight, so a free node
#     always exists; per ticket, overhead = the client's latency minus the
#     simulated compute (prefill + generation). Printed as p50 / p99.
#  2. throughput: 4 x NODES in flight, the accepting node's queue holding
#     the rest; tickets per second against the ideal, NODES / compute time
#     per ticket.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/sim-nodes.sh   # [NODES] [TICKETS]; start_node, wait_port, field; $work, cleaned up on exit

echo "starting $nodes simulated nodes ($rate tok/s, $max_tokens tokens a ticket)" >&2
peers=()
for i in $(seq 2 "$nodes"); do start_node "sim-$i"; done
for i in $(seq 2 "$nodes"); do peers+=(--peer "127.0.0.1:$(wait_port "sim-$i")"); done
start_node sim-1 "${peers[@]}"
port=$(wait_port sim-1)

for i in $(seq 1 "$tickets"); do printf '{"taskType":"sim","args":{"text":"ticket %d of the scale run"}}\n' "$i"; done \
  >"$work/tickets.jsonl"

# Runs the batch with $1 tickets in flight; the summary JSON goes to $2.
run_batch() {
  "$revis" batch "$work/tickets.jsonl" --node "127.0.0.1:$port" --concurrency "$1" -o "$work/results.jsonl" \
    --summary "$2" 2>"$work/batch.err" || { cat "$work/batch.err" >&2; echo "error: the batch failed" >&2; exit 1; }
  tail -n 4 "$work/batch.err" >&2
}

echo "run 1: $nodes in flight (dispatch overhead)" >&2
run_batch "$nodes" "$work/overhead.json"
echo "run 2: $((4 * nodes)) in flight (throughput)" >&2
run_batch "$((4 * nodes))" "$work/throughput.json"

p50=$(field "$work/overhead.json" overheadP50Ms)
p99=$(field "$work/overhead.json" overheadP99Ms)
tps=$(field "$work/throughput.json" ticketsPerS)
compute=$(field "$work/throughput.json" computeMeanMs)
used=$(grep -c '"[^"]*": [0-9]' <(sed -n '/"byNode"/,/}/p' "$work/throughput.json") || true)
awk -v n="$nodes" -v t="$tickets" -v p50="$p50" -v p99="$p99" -v tps="$tps" -v c="$compute" -v used="$used" 'BEGIN {
  ideal = n * 1000 / c
  printf "fabric scale: %d simulated nodes, %d tickets\n", n, t
  printf "dispatch overhead per ticket: p50 %.1f ms, p99 %.1f ms\n", p50, p99
  printf "throughput: %.1f tickets/s; ideal %.1f tickets/s (%d nodes x 1000 / %.1f ms a ticket); %.1f %% of ideal; %d nodes ran tickets\n",
         tps, ideal, n, c, 100 * tps / ideal, used
}'
