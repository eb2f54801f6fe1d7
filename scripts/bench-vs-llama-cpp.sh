#!/usr/bin/env bash
# revis against llama.cpp on the same model files, on one machine, in one
# run: rounds alternate the two programs, so both meet the same memory
# state and the same neighbours, and the ratios come from the same minutes.
# Within a round each prefill measurement runs right beside the other
# program's, and so does each generation measurement (which goes first
# swaps every round): some machines change speed within seconds, and a
# round's ratio should compare like with like. A benchmark: it asserts
# nothing.
#
#   scripts/bench-vs-llama-cpp.sh LLAMA_BENCH MODEL.gguf [MODEL.gguf ...]
#   ROUNDS=3 REPS=5 THREADS=2 PROMPT=512 GEN=128 REVIS=build/revis scripts/bench-vs-llama-cpp.sh ...
#   RAW=DIR keeps every run's own output (JSON) in DIR.
#   DEPTH=16384 compares at a context depth instead: revis bench --depth
#   DEPTH (its prefill fills the context from empty, i.e. a DEPTH-token
#   prompt; its generation runs after DEPTH tokens) against llama-bench
#   -p DEPTH -n 0 and -p 0 -n GEN -d DEPTH; PROMPT is not used, and there
#   are no roofline columns (the KV cache, not the weights, is most of what
#   a step reads at depth).
#   LLAMA_BATCHED_BENCH=PATH (with DEPTH) takes llama.cpp's two depth
#   figures from one `llama-batched-bench -npp DEPTH -ntg GEN -npl 1` run:
#   one prefill instead of llama-bench's two, for models whose 16k prompt
#   takes half an hour. Its prefill is the same DEPTH-token prompt from
#   empty, its generation the GEN steps right after it; one sample, as
#   with REPS=1.
#   LLAMA_ARGS="-mmp 0" passes more options to every llama-bench run (split
#   on spaces): -mmp 0 has it read the weights into memory rather than map
#   them, as revis does by default.
#   KERNELS=avx2 runs revis with those kernels (`revis bench --kernels`);
#   give llama.cpp a build for the same instructions to compare like with
#   like (for AVX2: -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON
#   -DGGML_F16C=ON -DGGML_AVX512=OFF).
#
# LLAMA_BENCH is llama.cpp's llama-bench binary (build it yourself; revis
# does not ship it). Per round and model it runs `revis bench --json` and
# `llama-bench -o jsonl` (prefill and generation as two calls) with the
# same prompt length, generated tokens, repetitions and threads, and takes
# each one's median over the repetitions. REPS=1 with more ROUNDS pairs
# the two programs most closely. llama-bench times generation from an
# empty context, revis bench after the prompt; so revis is also timed with
# a one-token prompt, and the generation ratio is taken between those two
# like-for-like figures (revis's after-the-prompt figure is printed beside
# it). Both roofline columns divide those generation speeds times revis's
# count of weight bytes per token by the best bandwidth revis measured in
# the round.
set -euo pipefail
cd "$(dirname "$0")/.."
revis=${REVIS:-build/revis}
rounds=${ROUNDS:-3}
reps=${REPS:-5}
threads=${THREADS:-2}
prompt=${PROMPT:-512}
gen=${GEN:-128}
raw=${RAW:-}
kernels=${KERNELS:-}
read -r -a llama_args <<<"${LLAMA_ARGS:-}"
depth=${DEPTH:-}
llama_batched=${LLAMA_BATCHED_BENCH:-}
[[ -z $raw ]] || mkdir -p "$raw"
(($# >= 2)) || { sed -n '11,13p' "$0" | sed 's/^# //' >&2; exit 2; }
llama_bench=$1
shift
[[ -x $revis ]] || { echo "error: $revis not found (build first, or set REVIS)" >&2; exit 1; }
[[ -x $llama_bench ]] || { echo "error: $llama_bench is not an executable llama-bench" >&2; exit 1; }
for model in "$@"; do [[ -f $model ]] || { echo "error: $model not found" >&2; exit 1; }; done

# The value of "key": in a one-line JSON object.
field() { grep -o "\"$1\": *[0-9.e+-]*" <<<"$2" | head -1 | sed 's/.*: *//'; }
# shellcheck source=bench-stats.sh
source scripts/bench-stats.sh  # median
# The median of llama-bench's samples_ts (JSON lines on standard input)
# for the test with n_prompt $1 and n_gen $2.
llama_median() {
  grep "\"n_prompt\": *$1," | grep "\"n_gen\": *$2," | grep -o '"samples_ts": *\[[^]]*\]' |
    sed 's/.*\[//; s/\]//' | tr ',' '\n' | median
}

# keep NAME TEXT...: appends the texts to RAW/NAME.jsonl, with the round.
keep() {
  [[ -n $raw ]] || return 0
  local name=$1
  shift
  printf '# round %s\n%s\n' "$round" "$(printf '%s\n' "$@")" >>"$raw/$name.jsonl"
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
choice=()
[[ -z $kernels ]] || choice=(--kernels "$kernels")
# Each program's JSON for a prompt of $2 tokens and $3 generated, kept in RAW.
# With a fourth argument, at that depth (the prompt length is then unused).
run_revis() {
  local out args=(-p "$2")
  [[ -z ${4:-} ]] || args=(--depth "$4")
  out=$("$revis" bench -m "$1" "${args[@]}" -n "$3" -r "$reps" -t "$threads" "${choice[@]}" --json 2>/dev/null)
  keep "revis-$(basename "$1")" "$out"
  printf '%s\n' "$out"
}
run_llama() {
  local out
  local at=()
  [[ -z ${4:-} ]] || at=(-d "$4")
  out=$("$llama_bench" -m "$1" -p "$2" -n "$3" "${at[@]}" "${llama_args[@]}" -r "$reps" -t "$threads" -o jsonl 2>/dev/null)
  keep "llama-$(basename "$1")" "$out"
  printf '%s\n' "$out"
}
run_llama_batched() {
  local out
  out=$("$llama_batched" -m "$1" -c $((depth + gen)) -npp "$depth" -ntg "$gen" -npl 1 "${llama_args[@]}" \
    -t "$threads" --output-format jsonl 2>&1 | grep '^{"n_kv_max"')
  keep "llama-batched-$(basename "$1")" "$out"
  printf '%s\n' "$out"
}
# measure WHAT MODEL: one of a round's four measurements, its figures left
# in variables. revis's prefill run also times generation after the prompt;
# its generation run starts from a one-token prompt.
measure() {
  local out
  case $1 in
    revis-prefill)
      out=$(run_revis "$2" "$prompt" "$gen")
      revis_pp=$(field prefill_tok_s "$out")
      revis_tg_deep=$(field gen_tok_s "$out")
      prefill_bandwidth=$(field bandwidth_gb_s "$out")
      bytes=$(field bytes_per_token "$out") ;;
    revis-generation)
      out=$(run_revis "$2" 1 "$gen")
      revis_tg=$(field gen_tok_s "$out")
      generation_bandwidth=$(field bandwidth_gb_s "$out") ;;
    llama-prefill) llama_pp=$(run_llama "$2" "$prompt" 0 | llama_median "$prompt" 0) ;;
    llama-generation) llama_tg=$(run_llama "$2" 0 "$gen" | llama_median 0 "$gen") ;;
    revis-depth)
      out=$(run_revis "$2" 0 "$gen" "$depth")
      revis_pp=$(field prefill_tok_s "$out")
      revis_tg=$(field gen_tok_s "$out") ;;
    llama-depth-prefill) llama_pp=$(run_llama "$2" "$depth" 0 | llama_median "$depth" 0) ;;
    llama-depth-generation) llama_tg=$(run_llama "$2" 0 "$gen" "$depth" | llama_median 0 "$gen") ;;
    llama-depth-batched)
      out=$(run_llama_batched "$2")
      llama_pp=$(field speed_pp "$out")
      llama_tg=$(field speed_tg "$out") ;;
  esac
}

# play MEASUREMENT...: per round and model, the measurements in this order
# (reversed in even rounds, so that neither program always goes first),
# then the round's line from line_of MODEL ROUND, printed and kept.
play() {
  local round model i
  for round in $(seq "$rounds"); do
    for model in "${models[@]}"; do
      if ((round % 2)); then
        for ((i = 1; i <= $#; i++)); do measure "${!i}" "$model"; done
      else
        for ((i = $#; i >= 1; i--)); do measure "${!i}" "$model"; done
      fi
      line=$(line_of "$model" "$round")
      echo "$line"
      echo "$line" >>"$results"
    done
  done
}
# The median, and the range, of column $2 of model $1's lines.
col() { awk -v m="$1" -v c="$2" '$1 == m {print $c}' "$results" | median; }
range() { awk -v m="$1" -v c="$2" '$1 == m {print $c}' "$results" | sort -g | sed -n '1p;$p' | paste -sd- -; }
models=("$@")

# DEPTH: one revis run gives both of its figures, between llama.cpp's two.
if [[ -n $depth ]]; then
  line_of() {
    awk -v m="$(basename "$1")" -v r="$2" -v rp="$revis_pp" -v lp="$llama_pp" -v rt="$revis_tg" -v lt="$llama_tg" \
      'BEGIN { printf "%-28s %5d %9.2f %9.2f %9.2f %9.2f %8.2f %8.2f", m, r, rp, lp, rt, lt, rp / lp, rt / lt }'
  }
  printf '%-28s %5s %9s %9s %9s %9s %8s %8s\n' model round "revis pp$depth" "llama pp" "revis tg@$depth" \
    "llama tg" "pp ratio" "tg ratio"
  if [[ -n $llama_batched ]]; then
    [[ -x $llama_batched ]] || { echo "error: $llama_batched is not an executable llama-batched-bench" >&2; exit 1; }
    play llama-depth-batched revis-depth
  else
    play llama-depth-prefill revis-depth llama-depth-generation
  fi
  echo
  echo "medians over $rounds rounds at depth $depth (ratios: the median of each round's ratio, and its range)"
  for model in "$@"; do
    name=$(basename "$model")
    printf '%-28s prefill of %s tokens: revis %s, llama.cpp %s tok/s, ratio %s (%s)\n' "$name" "$depth" \
      "$(col "$name" 3)" "$(col "$name" 4)" "$(col "$name" 7)" "$(range "$name" 7)"
    printf '%-28s generation at %s: revis %s, llama.cpp %s tok/s, ratio %s (%s)\n' "" "$depth" "$(col "$name" 5)" \
      "$(col "$name" 6)" "$(col "$name" 8)" "$(range "$name" 8)"
  done
  exit 0
fi

line_of() {
  # The better of the two runs' bandwidth (each the best pass of its run):
  # the memory flips between states on some machines, and a run that met
  # only the slow one would overstate both rooflines.
  local bandwidth
  bandwidth=$(printf '%s\n' "$prefill_bandwidth" "$generation_bandwidth" | sort -g | tail -1)
  awk -v m="$(basename "$1")" -v r="$2" -v rp="$revis_pp" -v lp="$llama_pp" -v rt="$revis_tg" \
    -v lt="$llama_tg" -v rd="$revis_tg_deep" -v bw="$bandwidth" -v by="$bytes" 'BEGIN {
      printf "%-28s %5d %9.2f %9.2f %9.2f %9.2f %9.2f %8.2f %8.2f %9.1f %9.1f", m, r, rp, lp, rt, lt, rd, rp / lp,
        rt / lt, 100 * rt * by / (bw * 1e9), 100 * lt * by / (bw * 1e9) }'
}
printf '%-28s %5s %9s %9s %9s %9s %9s %8s %8s %9s %9s\n' model round "revis pp" "llama pp" "revis tg" "llama tg" \
  "revis tg@$prompt" "pp ratio" "tg ratio" "revis rl%" "llama rl%"
play revis-prefill llama-prefill revis-generation llama-generation

echo
echo "medians over $rounds rounds (ratios: the median of each round's ratio, and its range)"
for model in "$@"; do
  name=$(basename "$model")
  printf '%-28s prefill: revis %s, llama.cpp %s tok/s, ratio %s (%s)\n' "$name" "$(col "$name" 3)" "$(col "$name" 4)" \
    "$(col "$name" 8)" "$(range "$name" 8)"
  printf '%-28s generation: revis %s, llama.cpp %s tok/s, ratio %s (%s); revis after %s tokens %s\n' "" \
    "$(col "$name" 5)" "$(col "$name" 6)" "$(col "$name" 9)" "$(range "$name" 9)" "$prompt" "$(col "$name" 7)"
  printf '%-28s roofline: revis %s %%, llama.cpp %s %%\n' "" "$(col "$name" 10)" "$(col "$name" 11)"
done
