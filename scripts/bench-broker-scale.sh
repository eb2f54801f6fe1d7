#!/usr/bin/env bash
# Scale-out on NATS JetStream, on one machine (docs/scale-out.md): one
# nats-server -js, NODES simulated nodes pulling from it (revis serve
# --engine sim --broker), and TICKETS tickets published by `revis batch
# --broker`, all at once. A benchmark, not a test: it prints numbers,
# asserts nothing beyond every ticket finishing.
#
#   scripts/bench-broker-scale.sh [NODES=50] [TICKETS=2000]
#   REVIS=build/revis SIM_TOKENS_PER_S=100 MAX_TOKENS=50 scripts/bench-broker-scale.sh 50 2000
#
# Prints pull -> start latency (a node fetched the ticket -> its executor
# started it: stats.queueWaitMs), client overhead (latency minus the
# simulated compute), both p50 / p99, and throughput against the ideal,
# NODES / compute time per ticket.
set -euo pipefail
cd "$(dirname "$0")/.."
nats=$(command -v nats-server || echo /usr/sbin/nats-server)
[[ -x $nats ]] || { echo "error: nats-server not found (apt-get install nats-server)" >&2; exit 1; }

source scripts/sim-nodes.sh   # [NODES] [TICKETS]; start_node, wait_port, field; $work, cleaned up on exit

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$nats" -js -a 127.0.0.1 -p "$port" -sd "$work/js" -l "$work/nats.log" &
pids+=($!)
broker=nats://127.0.0.1:$port
for _ in $(seq 1 250); do grep -q "Server is ready" "$work/nats.log" 2>/dev/null && break; sleep 0.02; done

echo "starting $nodes simulated nodes on $broker ($rate tok/s, $max_tokens tokens a ticket)" >&2
for i in $(seq 1 "$nodes"); do start_node "sim-$i" --broker "$broker"; done
for i in $(seq 1 "$nodes"); do wait_port "sim-$i" >/dev/null; done

for i in $(seq 1 "$tickets"); do printf '{"taskType":"sim","args":{"text":"ticket %d of the scale run"}}\n' "$i"; done \
  >"$work/tickets.jsonl"
"$revis" batch "$work/tickets.jsonl" --broker "$broker" --concurrency "$tickets" -o "$work/results.jsonl" \
  --summary "$work/summary.json" 2>"$work/batch.err" || { cat "$work/batch.err" >&2; echo "error: the batch failed" >&2; exit 1; }
tail -n 4 "$work/batch.err" >&2

# pull -> start, from every result's stats.
sed -n 's/.*"queueWaitMs":\([-0-9.e+]*\).*/\1/p' "$work/results.jsonl" | sort -g >"$work/pull.txt"
pct() { awk -v q="$1" '{ v[NR] = $1 } END { r = int(q * NR + 0.999999); if (r < 1) r = 1; print v[r] }' "$work/pull.txt"; }
used=$(grep -c '"[^"]*": [0-9]' <(sed -n '/"byNode"/,/}/p' "$work/summary.json") || true)
awk -v n="$nodes" -v t="$tickets" -v pp50="$(pct 0.5)" -v pp99="$(pct 0.99)" \
    -v o50="$(field "$work/summary.json" overheadP50Ms)" -v o99="$(field "$work/summary.json" overheadP99Ms)" \
    -v tps="$(field "$work/summary.json" ticketsPerS)" -v c="$(field "$work/summary.json" computeMeanMs)" -v used="$used" 'BEGIN {
  ideal = n * 1000 / c
  printf "broker scale: %d simulated nodes, %d tickets, one nats-server\n", n, t
  printf "pull -> start: p50 %.2f ms, p99 %.2f ms; client overhead (latency - compute): p50 %.1f ms, p99 %.1f ms\n", pp50, pp99, o50, o99
  printf "throughput: %.1f tickets/s; ideal %.1f tickets/s (%d nodes x 1000 / %.1f ms a ticket); %.1f %% of ideal; %d nodes ran tickets\n",
         tps, ideal, n, c, 100 * tps / ideal, used
}'
