#!/bin/sh
# Installs what the report's browser test (tests/report_browser.sh) needs,
# only when missing: Debian's chromium (tools/install-deps.sh, with sudo
# when not root) and node's puppeteer-core, from the npm registry, into
# build/npm (project-local: nothing global, nothing at the library's run
# time). `make test` runs it unless NO_DEPS=1. Exits 0 even when something
# cannot be installed: the browser test then skips and says why.
cd "$(dirname "$0")/.." || exit 0
[ -x /usr/bin/chromium ] || sh tools/install-deps.sh chromium || echo "install-browser-deps: could not install chromium"
command -v npm > /dev/null 2>&1 || sh tools/install-deps.sh nodejs npm || echo "install-browser-deps: could not install node/npm"
if [ ! -d build/npm/node_modules/puppeteer-core ] && command -v npm > /dev/null 2>&1; then
    mkdir -p build/npm
    # Pinned: the test was written against this API. No browser download
    # (puppeteer-core never fetches one; the test uses /usr/bin/chromium).
    npm install --prefix build/npm --no-audit --no-fund --loglevel=error puppeteer-core@22.15.0 ||
        echo "install-browser-deps: could not install puppeteer-core into build/npm"
fi
exit 0
