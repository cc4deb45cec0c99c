#!/bin/sh
# The run report in a real browser (`make test` runs it): a short lm run
# writes report.html; tgrad-report must rebuild the same page from the run
# folder alone (and reverse's); then tests/report_browser.js opens it, a
# reverse run's page and extrapolate's summary in headless Chromium
# (Debian's /usr/bin/chromium, through node's puppeteer-core installed in
# build/npm by tools/install-browser-deps.sh) and checks it, saving
# screenshots to SHOTS_attention.png, SHOTS_curves.png, SHOTS_page.png.
#   sh tests/report_browser.sh [BUILD [SHOTS]]    (default: build, BUILD/report_test/report)
# The README's screenshots: sh tests/report_browser.sh build docs/report (after a default
# lm run: REPORT=out/lm/report.html). Without Chromium, node or puppeteer-core it says so
# and skips (exit 0), unless REPORT_BROWSER_REQUIRED=1 (CI), where that fails.
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
DIR=$BUILD/report_test
SHOTS=${2:-$DIR/report}
PUPPETEER_DIR=$(pwd)/build/npm/node_modules
skip() {
    echo "report_browser: SKIPPED: $1 (tools/install-browser-deps.sh installs it; make test runs it unless NO_DEPS=1)"
    [ "${REPORT_BROWSER_REQUIRED:-0}" = 1 ] && exit 1
    exit 0
}
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || skip "no Chromium at ${CHROMIUM:-/usr/bin/chromium}"
command -v node > /dev/null 2>&1 || skip "no node"
[ -d "$PUPPETEER_DIR/puppeteer-core" ] || skip "no puppeteer-core in build/npm"
mkdir -p "$DIR" || exit 1
if [ -z "$REPORT" ]; then
    rm -rf "$DIR/lm"
    echo "report_browser: a short lm run ($DIR/lm)"
    "$BUILD/bin/lm" --steps 60 --eval-every 20 --tokens 60 --out "$DIR/lm" > "$DIR/lm.log" 2>&1 ||
        { tail -20 "$DIR/lm.log"; echo "report_browser: FAILED: lm"; exit 1; }
    REPORT=$DIR/lm/report.html
    "$BUILD/bin/report" "$DIR/lm" --out "$DIR/rebuilt.html" > /dev/null || { echo "report_browser: FAILED: tgrad-report"; exit 1; }
    cmp -s "$REPORT" "$DIR/rebuilt.html" || { echo "report_browser: FAILED: tgrad-report's page differs from lm's"; exit 1; }
    echo "ok   tgrad-report rebuilds lm's page byte for byte from the run folder"
fi
# The encoder's pages: a short reverse run with the learned table (its page
# shows it beside the fixed one), rebuilt by tgrad-report too, and
# extrapolate's summary with the positions of every kind.
rm -rf "$DIR/toy"
"$BUILD/bin/reverse" --pe learned --steps 40 --eval-every 20 --heldout 20 --out "$DIR/toy" > "$DIR/reverse.log" 2>&1 ||
    { tail -20 "$DIR/reverse.log"; echo "report_browser: FAILED: reverse"; exit 1; }
"$BUILD/bin/report" "$DIR/toy/reverse_learned" --out "$DIR/reverse_rebuilt.html" > /dev/null &&
    cmp -s "$DIR/toy/reverse_learned/report.html" "$DIR/reverse_rebuilt.html" ||
    { echo "report_browser: FAILED: tgrad-report's page differs from reverse's"; exit 1; }
echo "ok   tgrad-report rebuilds reverse's page byte for byte from the run folder"
# A copy of the lm run with a profiler's table (profile.json) and a crafted
# samples.jsonl: a line with text after its object (trying to set the page's
# title) is left out with a warning; the good line, holding "</script>",
# is shown as text; the page checked below like the others.
rm -rf "$DIR/crafted" && cp -r "$(dirname "$REPORT")" "$DIR/crafted" || exit 1
echo '{"title": "Time per op", "columns": ["op", "calls", "ms"], "rows": [["matmul", 120, 3.5], ["soft<max</script>", 4, null]]}' > "$DIR/crafted/profile.json"
printf '%s\n' '{"step": 1, "text": "x"}], "title": "pwned", "z": [' \
    '{"step": 2, "text": "</script><script>document.title = 1</script>"}' > "$DIR/crafted/samples.jsonl"
"$BUILD/bin/report" "$DIR/crafted" --out "$DIR/crafted.html" > /dev/null 2> "$DIR/crafted.err" &&
    grep -q "samples.jsonl: 1 line left out" "$DIR/crafted.err" && ! grep -q pwned "$DIR/crafted.html" ||
    { cat "$DIR/crafted.err"; echo "report_browser: FAILED: a crafted samples.jsonl line reached the page"; exit 1; }
echo "ok   a crafted samples.jsonl line is left out with a warning"
"$BUILD/bin/extrapolate" --task shift --steps 20 --eval-every 10 --heldout 10 --out "$DIR/toy" > "$DIR/extrapolate.log" 2>&1 ||
    { tail -20 "$DIR/extrapolate.log"; echo "report_browser: FAILED: extrapolate"; exit 1; }
echo "report_browser: $REPORT ($(wc -c < "$REPORT") bytes)"
PUPPETEER_DIR=$PUPPETEER_DIR timeout 300 node tests/report_browser.js "$REPORT" "$SHOTS" \
    "$DIR/toy/reverse_learned/report.html" "$DIR/toy/extrapolate/report.html" "$DIR/crafted.html"
