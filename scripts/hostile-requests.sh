#!/usr/bin/env bash
# Sends a node the requests that once crashed or stalled one, each alone
# and then ten at once, while polling /health every 50 ms, and prints for
# each shape the status it got, its time to an answer, and the slowest
# /health answer while it was in flight (docs/protocol.md, "Limits and
# browsers", gives the figures). A streaming request runs through the
# ten-at-once rounds and must complete.
#
#   scripts/hostile-requests.sh REVIS [MODEL]
#
# Without MODEL the node runs the simulated engine (`--engine sim`: the
# requests are parsed, converted and compiled all the same). Exits 1 when
# the node dies, a request gets no answer, /health goes unanswered for 5 s,
# or the streaming request does not complete: a liveness check, not a speed
# assertion (times are printed, never compared).
set -euo pipefail
revis=${1:?usage: hostile-requests.sh REVIS [MODEL]}
model=${2:-}
work=$(mktemp -d)
node_pid=
cleanup() {
  [[ -n $node_pid ]] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# ---- the shapes
repeat() { local out; printf -v out "%.0s$1" $(seq "$2"); printf '%s' "$out"; }
chat() { printf '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,%s}' "$1"; }
nested_schema() { printf '%s{"type":"string"}%s' "$(repeat '{"type":"object","properties":{"a":' "$1")" "$(repeat '}}' "$1")"; }
function_tool() { printf '"tools":[{"type":"function","function":{"name":"f","parameters":%s}}]' "$1"; }

chat "$(printf '"grammar":"root ::= %s\\"a\\"%s"' "$(repeat '(' 20000)" "$(repeat ')' 20000)")" > "$work/grammar-nested-20000"
chat "$(printf '"grammar":"root ::= %s"' "$(repeat ' [a-z]{0,10000}' 200)")" > "$work/grammar-repetitions-200x10000"
chat "$(printf '"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":%s}}' "$(nested_schema 10000)")" \
  > "$work/schema-nested-10000"
chat "$(function_tool "$(nested_schema 5000)")" > "$work/tool-parameters-nested-5000"
printf '{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":%s}]}' \
  "$(nested_schema 5000)" > "$work/anthropic-input-schema-nested-5000"
printf '{"messages":[{"role":"user","content":%s"hi"%s}]}' "$(repeat '[' 100000)" "$(repeat ']' 100000)" \
  > "$work/body-arrays-nested-100000"
props=$(for i in $(seq 20000); do printf '"p%d":{"type":"integer"},' "$i"; done)
required=$(for i in $(seq 20000); do printf '"p%d",' "$i"; done)
chat "$(printf '"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{%s},"required":[%s]}}}' \
  "${props%,}" "${required%,}")" > "$work/schema-required-20000"
defs=$(for i in $(seq 20000); do printf '"d%d":{"const":%d},' "$i" "$i"; done)
refs=$(for i in $(seq 20000); do printf '{"$ref":"#/$defs/d%d"},' "$i"; done)
chat "$(printf '"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$defs":{%s},"anyOf":[%s]}}}' \
  "${defs%,}" "${refs%,}")" > "$work/schema-refs-20000"
# The other dialects' parsers (their shape's prefix picks the route, send()).
printf '{"input":"hi","max_output_tokens":2,"tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f","parameters":%s}]}]}' \
  "$(nested_schema 5000)" > "$work/responses-namespace-parameters-nested-5000"
printf '{"input":%s"hi"%s}' "$(repeat '[' 20000)" "$(repeat ']' 20000)" > "$work/responses-input-nested-20000"
printf '{"model":"m","stream":false,"messages":[{"role":"user","content":"hi"}],"options":{"num_predict":2},"format":%s}' \
  "$(nested_schema 10000)" > "$work/ollama-format-nested-10000"
printf '{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":%s}]}' \
  "$(nested_schema 5000)" > "$work/count-tokens-input-schema-nested-5000"
shapes=(grammar-nested-20000 grammar-repetitions-200x10000 schema-nested-10000 tool-parameters-nested-5000
        anthropic-input-schema-nested-5000 body-arrays-nested-100000 schema-required-20000 schema-refs-20000
        responses-namespace-parameters-nested-5000 responses-input-nested-20000 ollama-format-nested-10000
        count-tokens-input-schema-nested-5000)

# ---- the node
args=(serve --port 0 --name hostile)
if [[ -n $model ]]; then args+=(-m "$model"); else args+=(--engine sim); fi
"$revis" "${args[@]}" > "$work/node.log" 2>&1 &
node_pid=$!
port=
for _ in $(seq 100); do
  port=$(grep -o 'listening on http://[^ ]*' "$work/node.log" | grep -o '[0-9]*$' || true)
  [[ -n $port ]] && curl -sf -o /dev/null "http://127.0.0.1:$port/health" && break
  port=
  sleep 0.1
done
[[ -n $port ]] || { echo "the node did not start:"; cat "$work/node.log"; exit 1; }
base=http://127.0.0.1:$port

# Polls /health until told to stop; writes the slowest answer's seconds, or
# "dead" when one took 5 s or failed.
poll_health() {  # out_file stop_file
  local worst=0 t
  while [[ ! -e $2 ]]; do
    if ! t=$(curl -s -o /dev/null -m 5 -w '%{time_total}' "$base/health"); then echo dead > "$1"; return; fi
    worst=$(awk -v a="$worst" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
    sleep 0.05
  done
  echo "$worst" > "$1"
}

# One request: "STATUS SECONDS", "000" when no answer came.
send() {  # shape
  local route=/v1/chat/completions
  case $1 in
    anthropic-*) route=/v1/messages ;;
    responses-*) route=/v1/responses ;;
    ollama-*) route=/api/chat ;;
    count-tokens-*) route=/v1/messages/count_tokens ;;
  esac
  curl -s -o /dev/null -m 300 -w '%{http_code} %{time_total}\n' -H 'Content-Type: application/json' \
    --data-binary @"$work/$1" "$base$route" || echo "000 300"
}

failed=0
printf '%-44s %8s %9s %12s %14s %13s\n' shape bytes status "alone (s)" "10 at once (s)" "worst /health"
for shape in "${shapes[@]}"; do
  rm -f "$work/stop"
  poll_health "$work/health" "$work/stop" &
  poller=$!
  read -r status alone < <(send "$shape")
  # Ten at once, beside a streaming request that must complete.
  curl -s -N -m 300 -H 'Content-Type: application/json' \
    -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":40,"stream":true}' "$base/v1/chat/completions" \
    > "$work/stream" &
  streamer=$!
  senders=()
  for i in $(seq 10); do
    send "$shape" > "$work/ten.$i" &
    senders+=($!)
  done
  wait "${senders[@]}" "$streamer"
  touch "$work/stop"
  wait "$poller"
  worst_ten=$(cat "$work"/ten.* | awk '{ if ($2 > m) m = $2 } END { print m }')
  statuses=$(cat "$work"/ten.* | awk '{ print $1 }' | sort -u | tr '\n' ' ')
  health=$(cat "$work/health")
  printf '%-44s %8d %9s %12.3f %14.3f %13s\n' "$shape" "$(stat -c %s "$work/$shape")" "$status" "$alone" "$worst_ten" "$health"
  if [[ $status == 000 || $statuses == *000* ]]; then echo "  no answer"; failed=1; fi
  if [[ $health == dead ]]; then echo "  /health went unanswered"; failed=1; fi
  if ! grep -q 'data: \[DONE\]' "$work/stream"; then echo "  the streaming request beside it did not complete"; failed=1; fi
  if ! kill -0 "$node_pid" 2>/dev/null; then echo "  the node died:"; tail -5 "$work/node.log"; exit 1; fi
done
exit $failed
