#!/usr/bin/env bash
# The dashboard in a real browser (tests/web/dashboard.test.mjs): Debian's
# chromium, driven by npm's playwright-core (never a browser it downloads),
# against real simulated nodes. Screenshots go to $REVIS_WEB_ARTIFACTS
# (default: a new temporary directory); their paths are printed.
# Usage: scripts/test-web.sh [REVIS_BINARY]   (default build/revis)
# Exit 0 when it passed, or when chromium is absent (skipped, with the reason).
set -euo pipefail
cd "$(dirname "$0")/.."
revis=$(realpath "${1:-build/revis}")
if [[ ! -x /usr/bin/chromium ]]; then
  echo "skipped: /usr/bin/chromium is not installed (apt-get install chromium; scripts/install-deps.sh)"
  exit 0
fi
artifacts=${REVIS_WEB_ARTIFACTS:-$(mktemp -d -t revis-web.XXXXXX)}
(cd tests/web && npm ci --no-audit --no-fund --loglevel=error)
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 timeout 120 node tests/web/dashboard.test.mjs "$revis" "$artifacts"
