#!/usr/bin/env bash
# The include graph of src/ against the module order (issue 39): a folder
# includes only folders below it, and the engine's internal headers stay in
# the engine's folders. Fast, no build: scripts/test.sh runs it in the
# release stage. Usage: scripts/check-layers.sh [repository root]
#
# The order, lowest first; it matches the CMake module graph
# (CMakeLists.txt, revis_module). A folder may include its own headers,
# include/revis/, and any folder listed before it.
ORDER="base hash sample jinja quant gguf gpu tokenizer model engine tools grammar kvstore hub bench
       chat protocol node api net fabric broker cli"
# The engine's folders: their headers are internal. Outside them only
# src/tools, src/bench (and tests/, fuzz/, which are not checked) may
# include them; everyone else goes through include/revis/.
ENGINE="model quant gguf tokenizer sample engine"
ENGINE_USERS="tools bench"

# KNOWN: the arrows that break these rules today, as "file -> header". They
# are allowed so that the check passes, and reported on every run; a new
# one fails. Remove a line when its include goes (issue 39 steps 2 and 4).
KNOWN="
# engine-internal headers outside the engine (issue 39 step 4): the
# sampler's seeded generator, which the simulated engine draws its words with
src/node/sim_inference.cpp -> sample/sampler.h
"

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2

rank() {  # position of a folder in ORDER, or nothing
  local i=0 f
  for f in $ORDER; do
    [ "$f" = "$1" ] && { echo $i; return; }
    i=$((i + 1))
  done
}
is_in() { local f; for f in $2; do [ "$f" = "$1" ] && return 0; done; return 1; }

status=0
new=() known_seen=()
for dir in src/*/; do
  folder=$(basename "$dir")
  from=$(rank "$folder")
  if [ -z "$from" ]; then
    echo "check-layers: src/$folder is not in ORDER (scripts/check-layers.sh)"
    status=1
    continue
  fi
  while IFS=: read -r file header; do
    to_folder=${header%%/*}
    [ "$to_folder" = "$folder" ] || [ "$to_folder" = revis ] && continue
    to=$(rank "$to_folder")
    [ -z "$to" ] && continue  # not a src/ folder (a system header in quotes)
    why=""
    if [ "$to" -gt "$from" ]; then
      why="upward ($folder is below $to_folder)"
    elif is_in "$to_folder" "$ENGINE" && ! is_in "$folder" "$ENGINE $ENGINE_USERS"; then
      why="engine-internal header outside the engine"
    fi
    [ -z "$why" ] && continue
    arrow="$file -> $header"
    if grep -qxF "$arrow" <<<"$KNOWN"; then
      known_seen+=("$arrow")
    else
      new+=("$arrow: $why")
    fi
  done < <(grep -oE '^#include "[a-z_0-9]+/[^"]+"' -r "$dir" --include='*.h' --include='*.cpp' |
           sed -E 's/:#include "/:/; s/"$//' | sort -u)
done

if [ ${#known_seen[@]} -gt 0 ]; then
  echo "check-layers: ${#known_seen[@]} known exceptions (allowed for now; listed in scripts/check-layers.sh):"
  printf '  KNOWN %s\n' "${known_seen[@]}"
fi
if [ ${#new[@]} -gt 0 ]; then
  echo "check-layers: FAIL: ${#new[@]} include(s) against the layering:"
  printf '  %s\n' "${new[@]}"
  status=1
fi
# A known exception that is gone should leave the list too.
while read -r line; do
  [ -z "$line" ] || [ "${line:0:1}" = "#" ] && continue
  if ! printf '%s\n' "${known_seen[@]}" | grep -qxF "$line"; then
    echo "check-layers: stale KNOWN entry (the include is gone; remove it): $line"
    status=1
  fi
done <<<"$KNOWN"
[ $status -eq 0 ] && echo "check-layers: OK (order: $(echo $ORDER))"
exit $status
