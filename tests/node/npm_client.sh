#!/usr/bin/env bash
# Runs a client script (openai_client.mjs: the official `openai` npm
# package; anthropic_client.mjs: `@anthropic-ai/sdk`; ollama_client.mjs:
# `ollama`; responses_client.mjs, agents_client.mjs: OpenAI's Responses API
# through `openai` and `@openai/agents`) against a real `revis serve`, giving
# it the node's base URL and token. Installs the packages from npm into
# WORK_DIR on first use. Exit 77 (ctest: skipped) when node/npm are missing,
# or when npm cannot be reached outside CI; in CI (CI=true) a failed install
# is a failure.
# Usage: npm_client.sh PACKAGES SCRIPT.mjs REVIS_BINARY MODEL.gguf WORK_DIR CHAT_TEMPLATE
# PACKAGES: one argument, the packages with their versions, space-separated
# ("@openai/agents@0.14 zod@4 openai@6"). CHAT_TEMPLATE: a template with a
# tool-call syntax (the clients call tools).
set -euo pipefail
packages=$1 script=$2 revis=$3 model=$4 work=$5 template=$6
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node or npm not found: skipped"
  exit 77
fi
prefix=$work/npm-clients/$(basename "$script" .mjs)
installed=true
for package in $packages; do
  name=${package%@*}  # openai@4 -> openai; @anthropic-ai/sdk@1 -> @anthropic-ai/sdk
  [ -d "$prefix/node_modules/$name" ] || installed=false
done
if ! $installed; then
  mkdir -p "$prefix"
  # shellcheck disable=SC2086  # the packages are words
  if ! timeout 300 npm install --prefix "$prefix" --no-audit --no-fund --no-save $packages >"$prefix/npm.log" 2>&1; then
    cat "$prefix/npm.log"
    [ "${CI:-}" = true ] && exit 1
    echo "npm install $packages failed (offline?): skipped"
    exit 77
  fi
fi
# ES modules resolve packages next to the importing file, so the script runs from there.
cp "$here/$script" "$here/checks.mjs" "$prefix/"

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
timeout 120 node "$prefix/$script" "http://127.0.0.1:$port" test-token
