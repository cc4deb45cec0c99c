#!/bin/sh
# lm's default run (1200 steps on the fortunes) with float products and with
# bf16 products (--precision bf16, tg_set_precision): the final validation
# loss and the wall time of each, and their loss curves in one figure
# (docs/lm_precision.png, drawn by build/bin/plot_runs). Prints a Markdown
# section for BENCHMARKS.md.
#   sh bench/lm_precision.sh [BUILD] [THREADS]   (defaults: build 1)
set -e
cd "$(dirname "$0")/.."
B="${1:-build}"
T="${2:-1}"
W=$(mktemp -d /tmp/tgrad-lmprec-XXXXXX)
trap 'rm -rf "$W"' EXIT
secs() { sed -n 's/^trained steps [0-9]*\.\.[0-9]* in \([0-9.]*\) s$/\1/p' "$1"; }
val() { tail -n 1 "$1" | sed -n 's/^val_loss=\([0-9.]*\) .*/\1/p'; }
for p in fp32 bf16; do
    "$B/bin/lm" --precision "$p" --threads "$T" --out "$W/$p" > "$W/$p.log" 2> /dev/null
done
"$B/bin/plot_runs" "$W/fp32" "$W/bf16" --labels "float products,bf16 products" \
    --title "lm's default run: float and bf16 products" --out docs/lm_precision.png > /dev/null
vf=$(val "$W/fp32.log")
vb=$(val "$W/bf16.log")
cat <<MD
## lm's default run in bf16 (\`--precision bf16\`)

From \`sh bench/lm_precision.sh $B $T\`: lm with its defaults (2 layers, d 128, 1200 steps on the fortunes), at $T
thread(s), with float products and with bf16 products and float sums (weights, AdamW, softmax, layer norm
and the loss in float).

| products | val loss (nats/byte) | seconds |
|---|---|---|
| float | $vf | $(secs "$W/fp32.log") |
| bf16 | $vb | $(secs "$W/bf16.log") |

Difference $(awk -v a="$vb" -v b="$vf" 'BEGIN { printf "%+.4f", a - b }') nats/byte (issue 24 asked for
at most 0.03). The loss curves, drawn by \`build/bin/plot_runs\`:

![lm's loss curves with float and bf16 products](docs/lm_precision.png)
MD
