#!/usr/bin/env bash
# `cmake --install BUILD --prefix DIR` as a user who may write nothing but
# DIR (nobody, when run as root; else the caller): everything must land
# under DIR, config and systemd unit included, and the installed binary
# must run. Called by scripts/test-package.sh; needs `revis` built in BUILD.
# Usage: scripts/test-install-prefix.sh [build]
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
fail() { echo "install --prefix check FAILED: $*" >&2; exit 1; }

dir=$(mktemp -d /tmp/revis-prefix.XXXXXX)
manifest="$build/install_manifest.txt"
had_manifest=0
[[ -e $manifest ]] && had_manifest=1
cleanup() {
  rm -rf "$dir"
  if ((!had_manifest)); then rm -f "$manifest"; fi
}
trap cleanup EXIT
as_user=()
if ((EUID == 0)); then
  # nobody writes DIR and the manifest that `cmake --install` leaves in the
  # build tree (a user's own tree is theirs), nothing else.
  chown nobody "$dir"
  touch "$manifest"
  chown nobody "$manifest"
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
fi
"${as_user[@]}" cmake --install "$build" --prefix "$dir/prefix" >"$dir.log" 2>&1 || { cat "$dir.log" >&2; rm -f "$dir.log"; fail "cmake --install --prefix"; }
# Every path it reported must be under DIR.
outside=$(grep -E '^-- (Installing|Up-to-date): ' "$dir.log" | sed -E 's/^-- [A-Za-z-]+: //' | grep -v "^$dir/prefix/" || true)
rm -f "$dir.log"
[[ -z $outside ]] || fail "installed outside the prefix: $outside"
for f in bin/revis etc/revis/revis.toml lib/systemd/system/revis.service share/doc/revis/README.md \
         share/doc/revis/operations.md; do
  [[ -f $dir/prefix/$f ]] || fail "$f is not under the prefix"
done
"$dir/prefix/bin/revis" --version >/dev/null || fail "the installed revis does not run"
if ((EUID == 0)); then
  [[ $(stat -c %U "$dir/prefix/etc/revis/revis.toml") == nobody ]] || fail "not installed as nobody"
fi
echo "cmake --install --prefix: $(cd "$dir/prefix" && find . -type f | wc -l) files, all under the prefix"
