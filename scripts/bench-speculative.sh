#!/usr/bin/env bash
# Speculative decoding's speed: greedy generation with no drafter, with
# prompt lookup (--lookup) and with a draft model (--draft; `mtp`: the
# target's own multi-token-prediction head), on the same
# prompt, in alternating rounds; per mode the median generation speed and
# the drafts' acceptance. A benchmark: it asserts nothing (the outputs are
# equal by construction, and tests/engine/speculative_test.cpp checks it).
#
#   scripts/bench-speculative.sh TARGET.gguf [DRAFT.gguf | mtp]
#   ROUNDS=3 THREADS=2 GEN=128 DRAFT_MAX=8 PROMPT_FILE=f.txt REVIS=build/revis scripts/bench-speculative.sh ...
#
# Without PROMPT_FILE the prompt is a summarize/rewrite-like one: a
# paragraph, then the request to restate it. Generation speed is what
# `revis run --json` reports (gen_tok_s: tokens after the first over the
# decoding time).
set -euo pipefail
cd "$(dirname "$0")/.."
revis=${REVIS:-build/revis}
rounds=${ROUNDS:-3}
threads=${THREADS:-2}
gen=${GEN:-128}
draft_max=${DRAFT_MAX:-8}
(($# >= 1)) || { sed -n '8,9p' "$0" | sed 's/^# //' >&2; exit 2; }
target=$1
draft=${2:-}
[[ -x $revis ]] || { echo "error: $revis not found (build first, or set REVIS)" >&2; exit 1; }
for f in "$target" $draft; do [[ -f $f || $f == mtp ]] || { echo "error: $f not found" >&2; exit 1; }; done
prompt_file=${PROMPT_FILE:-}
if [[ -z $prompt_file ]]; then
  prompt_file=$(mktemp)
  trap 'rm -f "$prompt_file"' EXIT
  cat >"$prompt_file" <<'TEXT'
The city council met on Tuesday to discuss the new bridge over the river. The bridge will connect the
old town with the northern district, and it will carry trams, bicycles and pedestrians but no cars. The
council approved a budget of 42 million euros, and construction will start in March next year. The mayor
said that the bridge will cut the travel time between the two districts from twenty minutes to eight
minutes, and that the old ferry will keep running until the bridge opens.

Rewrite the text above in plain words, keeping every fact:
TEXT
fi

# shellcheck source=bench-stats.sh
source scripts/bench-stats.sh  # median
field() { grep -o "\"$1\": *[0-9.e+-]*" <<<"$2" | head -1 | sed 's/.*: *//'; }

modes=(none lookup)
[[ -z $draft ]] || modes+=(draft)
declare -A speeds drafted accepted
for ((round = 1; round <= rounds; ++round)); do
  for mode in "${modes[@]}"; do
    flags=()
    case $mode in
      lookup) flags=(--lookup --draft-max "$draft_max") ;;
      draft) flags=(--draft "$draft" --draft-max "$draft_max") ;;
    esac
    out=$("$revis" run -m "$target" -f "$prompt_file" -n "$gen" --temp 0 --ignore-eos -t "$threads" --json \
      "${flags[@]}" 2>/dev/null)
    speeds[$mode]+="$(field gen_tok_s "$out") "
    drafted[$mode]=$(($(field draft_tokens "$out") + ${drafted[$mode]:-0}))
    accepted[$mode]=$(($(field accepted_tokens "$out") + ${accepted[$mode]:-0}))
  done
done

base=$(tr ' ' '\n' <<<"${speeds[none]}" | grep . | median)
printf '%-8s %10s %8s %10s %10s %11s\n' mode "gen tok/s" speedup drafted accepted "acceptance"
for mode in "${modes[@]}"; do
  s=$(tr ' ' '\n' <<<"${speeds[$mode]}" | grep . | median)
  d=${drafted[$mode]}
  a=${accepted[$mode]}
  rate=$(awk -v a="$a" -v d="$d" 'BEGIN { if (d > 0) printf "%.0f%%", 100 * a / d; else print "-" }')
  printf '%-8s %10.1f %7.2fx %10d %10d %11s\n' "$mode" "$s" "$(awk -v s="$s" -v b="$base" 'BEGIN { print s / b }')" \
    "$d" "$a" "$rate"
done
