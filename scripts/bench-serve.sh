#!/usr/bin/env bash
# Concurrent HTTP clients against two servers on one model file and one
# machine: `revis serve --parallel P` and llama.cpp's `llama-server -np P`,
# both up at once and measured in turns (each round runs every client
# count on revis, then on llama-server), so both meet the same machine
# state. Each client sends one POST /v1/completions (TOKENS tokens,
# temperature 0, a prompt of its own) at the same moment; the aggregate is
# every completion token over the wall time from the common start to the
# last answer. A benchmark: it asserts nothing.
#
#   scripts/bench-serve.sh LLAMA_SERVER MODEL.gguf
#   ROUNDS=3 CLIENTS=1,2,4,8 TOKENS=128 THREADS=2 PARALLEL=8 REVIS=build/revis scripts/bench-serve.sh ...
#
# Prints, per client count, medians over the rounds: each server's
# aggregate tok/s and its ratio to its own one-client figure, and the
# ratio revis / llama-server. LLAMA_SERVER is llama.cpp's binary (build it
# yourself: cmake -DLLAMA_BUILD_SERVER=ON, target llama-server).
set -euo pipefail
cd "$(dirname "$0")/.."
revis=${REVIS:-build/revis}
rounds=${ROUNDS:-3}
clients=${CLIENTS:-1,2,4,8}
tokens=${TOKENS:-128}
threads=${THREADS:-2}
parallel=${PARALLEL:-8}
(($# == 2)) || { sed -n '10,11p' "$0" | sed 's/^# //' >&2; exit 2; }
llama=$1 model=$2
[[ -x $revis ]] || { echo "error: $revis not found (build first, or set REVIS)" >&2; exit 1; }
[[ -x $llama ]] || { echo "error: $llama is not an executable llama-server" >&2; exit 1; }
[[ -f $model ]] || { echo "error: $model not found" >&2; exit 1; }

logs=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$logs"' EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
revis_port=$(free_port) llama_port=$(free_port)
"$revis" serve -m "$model" -t "$threads" --parallel "$parallel" --port "$revis_port" 2>"$logs/revis.log" &
# llama-server splits its context among the slots: 512 each.
"$llama" -m "$model" -t "$threads" -np "$parallel" -c $((parallel * 512)) --port "$llama_port" \
  >"$logs/llama.log" 2>&1 &
for port in "$revis_port" "$llama_port"; do
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$port/health" >/dev/null || { echo "a server did not start:"; tail -20 "$logs"/*.log; exit 1; }
done
echo "model $(basename "$model"), $threads threads, $parallel slots each, $tokens tokens per client, $rounds rounds"
echo "revis: $(grep -o 'tier default: .*' "$logs/revis.log" | head -1)"

python3 - "$revis_port" "$llama_port" "$clients" "$tokens" "$rounds" <<'PY'
import http.client, json, statistics, sys, threading, time

revis_port, llama_port, clients, tokens, rounds = sys.argv[1:]
clients = [int(c) for c in clients.split(",")]
tokens, rounds = int(tokens), int(rounds)
servers = {"revis": int(revis_port), "llama-server": int(llama_port)}

def one(port, i, out):
    body = json.dumps({"prompt": f"Client {i} asks for story number {i * 7 + 3}: once upon a time",
                       "max_tokens": tokens, "temperature": 0, "seed": i}).encode()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = json.loads(c.getresponse().read())
    out[i] = r["usage"]["completion_tokens"]

def aggregate(port, n):
    out = [0] * n
    threads = [threading.Thread(target=one, args=(port, i, out)) for i in range(n)]
    start = time.perf_counter()
    for t in threads: t.start()
    for t in threads: t.join()
    return sum(out) / (time.perf_counter() - start)

for port in servers.values():  # warm-up: load, first pages touched
    aggregate(port, 1)
runs = {(s, n): [] for s in servers for n in clients}
for r in range(rounds):
    for n in clients:
        for s, port in servers.items():
            runs[(s, n)].append(aggregate(port, n))
    print(f"round {r + 1}/{rounds} done", file=sys.stderr)

med = {k: statistics.median(v) for k, v in runs.items()}
print(f"{'clients':>7} {'revis tok/s':>12} {'x own 1':>8} {'llama tok/s':>12} {'x own 1':>8} {'revis/llama':>12}")
for n in clients:
    rv, ll = med[("revis", n)], med[("llama-server", n)]
    print(f"{n:>7} {rv:>12.1f} {rv / med[('revis', clients[0])]:>8.2f} {ll:>12.1f} "
          f"{ll / med[('llama-server', clients[0])]:>8.2f} {rv / ll:>12.2f}")
PY
