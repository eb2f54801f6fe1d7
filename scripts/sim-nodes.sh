# Sourced by the scale benchmarks (bench-fabric-scale.sh,
# bench-broker-scale.sh): simulated nodes on one machine. Reads the
# caller's arguments [NODES=50] [TICKETS=2000] and REVIS, SIM_TOKENS_PER_S,
# MAX_TOKENS; sets $work (a temporary directory with tasks.toml, removed on
# exit with every process started).
nodes=${1:-50}
tickets=${2:-2000}
revis=${REVIS:-build/revis}
rate=${SIM_TOKENS_PER_S:-100}
max_tokens=${MAX_TOKENS:-50}
[[ -x $revis ]] || { echo "error: $revis not found (build first, or set REVIS)" >&2; exit 1; }
((nodes >= 1 && tickets >= 1)) || { echo "error: NODES and TICKETS must be at least 1" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/tasks.toml" <<EOF
[tasks.sim]
tier = "small"
user = "{{text}}"
required = ["text"]
max_tokens = $max_tokens
EOF

# Starts a node in the background; its log is $work/NAME.log.
start_node() {
  local name=$1; shift
  "$revis" serve --engine sim --sim-tokens-per-s "$rate" --catalog "$work/tasks.toml" --name "$name" \
    --port 0 --queue-limit "$((tickets + 16))" "$@" 2>"$work/$name.log" >/dev/null &
  pids+=($!)
}

# The port a node listens on, once it is ready.
wait_port() {
  local log=$work/$1.log
  for _ in $(seq 1 500); do
    if grep -qE ' info +ready$' "$log" 2>/dev/null; then
      sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n 1
      return 0
    fi
    sleep 0.02
  done
  echo "error: node $1 did not start:" >&2
  cat "$log" >&2
  return 1
}

# A number from a summary file (flat keys, one per line).
field() { sed -n "s/^ *\"$2\": \([-0-9.e+]*\),\{0,1\}$/\1/p" "$1"; }
