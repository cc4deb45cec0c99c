#!/bin/sh
# What a vocabulary buys: lm on the fortunes with bytes (V 256) against a
# BPE of VOCAB ids trained on the same text (tgrad-tokenize train), the same
# model (lm's defaults) and the same wall-clock budget: the BPE run's steps
# are set so that it takes as long as the byte run did (its ms per step
# measured on a short run first). Compared in bits per byte, which do not
# depend on the vocabulary. Prints a Markdown section for BENCHMARKS.md and
# the README.
#   sh bench/lm_vocab.sh [BUILD] [VOCAB] [STEPS]   (defaults: build 2048 1200)
set -e
cd "$(dirname "$0")/.."
B="${1:-build}"
V="${2:-2048}"
S="${3:-1200}"
W=$(mktemp -d /tmp/tgrad-lmvocab-XXXXXX)
trap 'rm -rf "$W"' EXIT
"$B/bin/tokenize" corpus -o "$W/fortunes.txt" > /dev/null
"$B/bin/tokenize" train --vocab-size "$V" "$W/fortunes.txt" -o "$W/v.tiktoken" > /dev/null 2>&1
secs() { sed -n 's/^trained steps [0-9]*\.\.[0-9]* in \([0-9.]*\) s$/\1/p' "$1"; }
last() { tail -n 1 "$1"; }
"$B/bin/lm" --data "$W/fortunes.txt" --steps "$S" --out "$W/bytes" > "$W/bytes.log" 2> /dev/null
tb=$(secs "$W/bytes.log")
# the BPE run's ms per step (its head is larger), from 50 steps
"$B/bin/lm" --data "$W/fortunes.txt" --tokenizer "$W/v.tiktoken" --steps 50 --eval-every 50 --eval-batches 1 \
    --tokens 0 --out "$W/probe" > "$W/probe.log" 2> /dev/null
tp=$(secs "$W/probe.log")
sb=$(awk -v t="$tb" -v p="$tp" 'BEGIN { printf "%d", t / (p / 50) }')
"$B/bin/lm" --data "$W/fortunes.txt" --tokenizer "$W/v.tiktoken" --steps "$sb" --out "$W/bpe" > "$W/bpe.log" 2> /dev/null
bytes_line=$(last "$W/bytes.log")
bpe_line=$(last "$W/bpe.log")
vb=$(echo "$bytes_line" | sed -n 's/^val_loss=\([0-9.]*\) nats\/byte$/\1/p')
bpb_bytes=$(awk -v v="$vb" 'BEGIN { printf "%.4f", v / log(2) }')
bpb_bpe=$(echo "$bpe_line" | sed -n 's/.*(\([0-9.]*\) bits\/byte.*/\1/p')
per=$(echo "$bpe_line" | sed -n 's/.*, \([0-9.]*\) bytes a token).*/\1/p')
echo "## What a vocabulary buys (lm, bytes against a trained BPE)"
echo
echo "From \`sh bench/lm_vocab.sh $B $V $S\`: lm's default model (2 layers, d 128, T 64 tokens, batch 32) on the"
echo "fortunes, once on bytes and once on a $V-id BPE trained on the same text (\`tgrad-tokenize train\`), the BPE"
echo "run given as many steps as fit in the byte run's time. Validation in bits per byte (the same text both ways)."
echo
echo "| tokenizer | steps | seconds | val loss | bits per byte |"
echo "|---|---|---|---|---|"
echo "| bytes (V 256) | $S | $tb | $vb nats/byte | $bpb_bytes |"
echo "| BPE (V $V, $per bytes a token) | $sb | $(secs "$W/bpe.log") | $(echo "$bpe_line" | sed -n 's/^val_loss=\([0-9.]*\) nats\/token.*/\1/p') nats/token | $bpb_bpe |"
