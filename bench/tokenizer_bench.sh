#!/bin/sh
# `make bench`'s tokenizer part: tgrad's GPT-2 encoding against tiktoken's
# (npm tiktoken, the WASM build of its Rust core, run by node) on the whole
# fortunes corpus and on multilingual text, then the encoding speed of
# tgrad, tiktoken and js-tiktoken on the same texts, single thread, best of
# 5 runs each, and the time to train a 4096-id BPE on the fortunes corpus.
# Prints a Markdown section for BENCHMARKS.md.
#   sh bench/tokenizer_bench.sh [BUILD]     (BUILD: the build directory, default build)
# Multilingual text: the seed documents of ../shared/seeds (Japanese,
# Vietnamese, Portuguese, Korean) when present, else tests/data/bpe_multilingual.txt;
# repeated to about 1 MB for the speed table.
set -e
cd "$(dirname "$0")/.."
B="${1:-build}"
T="$B/bin/tokenize"
sh tools/install-tokenizer-deps.sh > /dev/null || { echo "tokenizer bench: npm packages missing; skipped"; exit 0; }
W=$(mktemp -d /tmp/tgrad-tokbench-XXXXXX)
trap 'rm -rf "$W"' EXIT
"$T" corpus -o "$W/fortunes.txt" > /dev/null
SEEDS=../shared/seeds
if ls $SEEDS/0*.txt > /dev/null 2>&1; then
    cat $SEEDS/0*.txt > "$W/multi.txt"
    MULTI="the five seed documents of ../shared/seeds (Japanese, Vietnamese, Portuguese, Korean)"
else
    cp tests/data/bpe_multilingual.txt "$W/multi.txt"
    MULTI="tests/data/bpe_multilingual.txt"
fi
: > "$W/multi_big.txt"
while [ "$(wc -c < "$W/multi_big.txt")" -lt 1000000 ]; do cat "$W/multi.txt" >> "$W/multi_big.txt"; done

mb() { awk -v b="$(wc -c < "$1")" 'BEGIN { printf "%.2f", b / 1e6 }'; }
echo "## Tokenizer: tgrad's byte-level BPE against tiktoken"
echo
echo "From \`sh bench/tokenizer_bench.sh\` (\`make bench\`), single thread; tiktoken $(node -p "require('./build/npm/node_modules/tiktoken/package.json').version") (npm, WASM) and js-tiktoken $(node -p "require('./build/npm/node_modules/js-tiktoken/package.json').version") under node $(node --version)."
echo
echo "Identity of the ids with tiktoken's \`gpt2\` encoding (\`encode_ordinary\`):"
echo
for f in fortunes multi; do
    node bench/tiktoken_ids.js ids "$W/$f.txt" > "$W/$f.ref"
    "$T" encode --quiet --vocab gpt2 "$W/$f.txt" -o - > "$W/$f.ids"
    name=$([ $f = fortunes ] && echo "the fortunes corpus" || echo "$MULTI")
    if cmp -s "$W/$f.ref" "$W/$f.ids"; then
        echo "- $name, $(mb "$W/$f.txt") MB: $(wc -l < "$W/$f.ids") ids, identical"
    else
        echo "- $name, $(mb "$W/$f.txt") MB: **DIFFERENT** ($(wc -l < "$W/$f.ids") ids, tiktoken $(wc -l < "$W/$f.ref")); first difference: $(cmp "$W/$f.ref" "$W/$f.ids" | head -1)"
    fi
done
echo
echo "| text | MB | tgrad MB/s | tiktoken (WASM) MB/s | js-tiktoken MB/s | tgrad / tiktoken |"
echo "|---|---:|---:|---:|---:|---:|"
for f in fortunes multi_big; do
    tg=$("$T" encode --repeat 5 --vocab gpt2 "$W/$f.txt" -o "$W/x.npy" 2>&1 | sed -n 's/.*(\([0-9.]*\) MB\/s).*/\1/p')
    node bench/tiktoken_ids.js time "$W/$f.txt" 5 > "$W/t"
    tk=$(sed -n 's/^tiktoken //p' "$W/t")
    js=$(sed -n 's/^js-tiktoken //p' "$W/t")
    name=$([ $f = fortunes ] && echo "fortunes corpus" || echo "multilingual (repeated)")
    echo "| $name | $(mb "$W/$f.txt") | $tg | $tk | $js | $(awk -v a="$tg" -v b="$tk" 'BEGIN { printf "%.1fx", a / b }') |"
done
echo
tr=$("$T" train --quiet --vocab-size 4096 "$W/fortunes.txt" -o "$W/f.tiktoken" | sed -n 's/.* in \([0-9.]*\) s.*/\1/p')
echo "BPE training, 4096 ids (3839 merges) on the fortunes corpus ($(mb "$W/fortunes.txt") MB): $tr s."
node bench/tiktoken_ids.js ids "$W/fortunes.txt" --ranks "$W/f.tiktoken" > "$W/f4096.ref"
"$T" encode --quiet --vocab "$W/f.tiktoken" "$W/fortunes.txt" -o - > "$W/f4096.ids"
if cmp -s "$W/f4096.ref" "$W/f4096.ids"; then same="identical"; else same="**DIFFERENT**"; fi
echo "The trained vocabulary, loaded by tiktoken from its rank file, encodes the corpus to the same ids as tgrad: $same ($(wc -l < "$W/f4096.ids") ids)."
