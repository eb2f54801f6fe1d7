#!/usr/bin/env bash
# Runs openai_client.mjs (the official `openai` npm package) against a real
# `revis serve`. Installs the package from npm into WORK_DIR on first use.
# Exit 77 (ctest: skipped) when node/npm are missing, or when npm cannot be
# reached outside CI; in CI (CI=true) a failed install is a failure.
# Usage: openai_client.sh REVIS_BINARY MODEL.gguf WORK_DIR CHAT_TEMPLATE
# (a template with a tool-call syntax: the client calls tools).
set -euo pipefail
revis=$1 model=$2 work=$3 template=$4
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node or npm not found: skipped"
  exit 77
fi
prefix=$work/openai-client
if [ ! -d "$prefix/node_modules/openai" ]; then
  mkdir -p "$prefix"
  if ! timeout 300 npm install --prefix "$prefix" --no-audit --no-fund --no-save openai@4 >"$prefix/npm.log" 2>&1; then
    cat "$prefix/npm.log"
    [ "${CI:-}" = true ] && exit 1
    echo "npm install openai failed (offline?): skipped"
    exit 77
  fi
fi
# ES modules resolve packages next to the importing file, so the script runs from there.
cp "$here/openai_client.mjs" "$prefix/"

log=$(mktemp)
"$revis" serve -m "$model" --chat-template "$template" --port 0 -t 2 --token test-token 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$log"' EXIT
port=
for _ in $(seq 300); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && grep -q ' ready$' "$log" && break
  kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "the node did not start"; cat "$log"; exit 1; }
timeout 120 node "$prefix/openai_client.mjs" "http://127.0.0.1:$port/v1" test-token
