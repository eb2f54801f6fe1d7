#!/usr/bin/env bash
# The package stage of scripts/test.sh: builds the .deb from a configured
# release build directory (cpack -G DEB), installs it with dpkg -i, checks
# the installed files without systemctl (CI has no systemd running: the
# maintainer scripts then leave the service alone), verifies the unit with
# systemd-analyze, installs it again over itself as an upgrade does, and
# purges it. The revis user and /var/lib/revis, which a purge keeps (they
# are the operator's data), are removed too when this script made them.
# Before that, scripts/test-install-prefix.sh installs the build with
# `cmake --install --prefix` into a temporary directory as nobody.
# Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
fail() { echo "package check FAILED: $*" >&2; exit 1; }

rm -f "$build"/revis_*.deb
# The unit names /usr/bin/revis: the package's prefix, whatever the tree had.
# Configuring again also takes the current commit for --version.
cmake -S . -B "$build" -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build "$build" --target revis >/dev/null
# A user's install: `cmake --install --prefix DIR` as nobody, all under DIR.
bash scripts/test-install-prefix.sh "$build"
(cd "$build" && cpack -G DEB >/dev/null)
debs=("$build"/revis_*.deb)
deb=${debs[0]}
[[ -f $deb ]] || fail "cpack made no .deb in $build"
dpkg-deb --field "$deb" Package Version Depends Recommends
# The install rules put the config and unit under the prefix; the package
# has them at /etc and /lib/systemd (packaging/package-layout.cmake).
listing=$(dpkg-deb -c "$deb" | awk '{print $NF}')
for f in ./etc/revis/revis.toml ./lib/systemd/system/revis.service ./usr/bin/revis; do
  grep -qxF "$f" <<<"$listing" || fail "the .deb has no $f"
done
if grep -qE '^\./usr/(etc|lib)/' <<<"$listing"; then fail "the .deb has files under /usr/etc or /usr/lib"; fi
if dpkg-query -W -f='${Status}' revis 2>/dev/null | grep -q "ok installed"; then fail "a revis package is installed already; remove it first"; fi
made_user=1 made_state=1
getent passwd revis >/dev/null && made_user=0
[[ -e /var/lib/revis ]] && made_state=0
cleanup() {
  dpkg -P revis >/dev/null 2>&1 || true
  if ((made_state)); then rm -rf /var/lib/revis; fi
  if ((made_user)) && getent passwd revis >/dev/null; then deluser --system --quiet revis >/dev/null 2>&1 || userdel revis; fi
  if ((made_user)) && getent group revis >/dev/null; then delgroup --system --quiet revis >/dev/null 2>&1 || groupdel revis; fi
}
trap cleanup EXIT
dpkg -i "$deb" >/dev/null

[[ -x /usr/bin/revis ]] || fail "/usr/bin/revis"
/usr/bin/revis --version | grep -q '(commit ' || fail "revis --version names no commit"
/usr/bin/revis --version | grep -q '^kernels: scalar' || fail "revis --version names no kernels"
/usr/bin/revis --version
for f in /lib/systemd/system/revis.service /etc/revis/revis.toml /usr/share/doc/revis/operations.md \
         /usr/share/doc/revis/README.md; do
  [[ -f $f ]] || fail "$f is not installed"
done
getent passwd revis >/dev/null || fail "no revis system user"
[[ $(stat -c '%U %a' /var/lib/revis) == "revis 700" ]] || fail "/var/lib/revis: $(stat -c '%U %a' /var/lib/revis)"
[[ $(stat -c '%U:%G %a' /etc/revis/revis.toml) == "root:revis 640" ]] || fail "/etc/revis/revis.toml: $(stat -c '%U:%G %a' /etc/revis/revis.toml)"
dpkg-query -W -f='${Conffiles}\n' revis | grep -q /etc/revis/revis.toml || fail "revis.toml is not a conffile"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /lib/systemd/system/revis.service || fail "systemd-analyze verify"
else
  echo "systemd-analyze is not installed (Debian: apt-get install systemd): the unit is not verified"
fi
grep -q '^Type=notify' /lib/systemd/system/revis.service || fail "the unit is not Type=notify"
# The default config parses and names the model it wants: the node, run as
# the service user, stops at the missing model (with engine sim it would
# refuse the model line instead).
out=$(runuser -u revis -- /usr/bin/revis serve --config /etc/revis/revis.toml --port 0 2>&1 || true)
grep -q /var/lib/revis/models/default.gguf <<<"$out" || fail "revis serve with the default config said: $out"

# An upgrade (here to the same version): the edited config is kept, the
# user and the state directory are reused.
echo "# edited by test-package.sh" >>/etc/revis/revis.toml
dpkg -i "$deb" >/dev/null
grep -q "edited by test-package.sh" /etc/revis/revis.toml || fail "reinstalling replaced the edited /etc/revis/revis.toml"
[[ $(stat -c '%U %a' /var/lib/revis) == "revis 700" ]] || fail "/var/lib/revis after reinstalling: $(stat -c '%U %a' /var/lib/revis)"

dpkg -P revis >/dev/null
[[ ! -e /usr/bin/revis ]] || fail "/usr/bin/revis is left after dpkg -P"
[[ ! -e /etc/revis/revis.toml ]] || fail "/etc/revis/revis.toml is left after dpkg -P"
[[ -d /var/lib/revis ]] || fail "dpkg -P removed /var/lib/revis, the operator's data"
cleanup
trap - EXIT
echo "package $(basename "$deb"): installed, checked, removed"
