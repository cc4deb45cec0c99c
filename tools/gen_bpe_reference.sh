#!/bin/sh
# Regenerates the reference ids that tests/test_bpe.c compares tgrad's
# encoder with, from tiktoken (npm, run by node): GPT-2's encoding of the
# multilingual text (ordinary, and with <|endoftext|> as its id) and of the
# fortunes excerpt, and the ids of the multilingual text under the vocabulary
# tgrad trains on the excerpt (512 ids), which is kept beside them, so the
# test checks training and encoding against files tiktoken produced.
#   sh tools/gen_bpe_reference.sh      (after make; writes tests/data/bpe_*)
set -e
cd "$(dirname "$0")/.."
sh tools/install-tokenizer-deps.sh
make --no-print-directory build/bin/tokenize > /dev/null
D=tests/data
node bench/tiktoken_ids.js ids $D/bpe_multilingual.txt > $D/bpe_multilingual.gpt2.ids
node bench/tiktoken_ids.js ids $D/bpe_multilingual.txt --special > $D/bpe_multilingual.gpt2-special.ids
node bench/tiktoken_ids.js ids $D/fortunes_excerpt.txt > $D/fortunes_excerpt.gpt2.ids
build/bin/tokenize train --quiet --vocab-size 512 $D/fortunes_excerpt.txt -o $D/bpe_excerpt512.tiktoken > /dev/null
node bench/tiktoken_ids.js ids $D/bpe_multilingual.txt --ranks $D/bpe_excerpt512.tiktoken > $D/bpe_multilingual.excerpt512.ids
wc -l $D/*.ids
