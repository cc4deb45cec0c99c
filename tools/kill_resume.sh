#!/bin/sh
# Kills an lm run N times at random moments (SIGKILL, a checkpoint every
# step so that many kills land inside a save), resuming it each time, then
# checks that it ends with the bytes of the same run never interrupted:
# the training state, the model and the metrics log's steps 1..S.
# tests/test_lm_run.c does 20 kills in `make test`; this does as many as
# asked:
#   sh tools/kill_resume.sh [N kills, default 200] [build dir, default build]
set -eu
kills=${1:-200}
build=${2:-build}
lm="$(cd "$build/bin" && pwd)/lm"
work=$(mktemp -d /tmp/tgrad-kill-resume.XXXXXX)
trap 'rm -rf "$work"' EXIT
args="--data $(pwd)/tests/data/fortunes_excerpt.txt --batch 4 --block 16 --layers 1 --heads 2 --dim 16"
args="$args --eval-batches 2 --tokens 8 --dropout 0.1 --steps 80 --eval-every 10 --save-every 1"
cd "$work"
"$lm" $args --out ref > /dev/null 2>&1
k=0
while [ "$k" -lt "$kills" ]; do
    if [ -e k/train_state.safetensors ]; then "$lm" --resume k > /dev/null 2>&1 & else "$lm" $args --out k > /dev/null 2>&1 & fi
    pid=$!
    # 10 to 300 ms: startup, steps and saves all get hit
    sleep "0.$(printf '%03d' $(( $(od -An -N2 -tu2 /dev/urandom) % 290 + 10 )))"
    if kill -9 "$pid" 2> /dev/null; then k=$((k + 1)); fi
    wait "$pid" 2> /dev/null || true
    # a run that finished before its kill starts again from nothing
    if [ -e k/train_state.safetensors ] && grep -q '"step": 80,' k/metrics.jsonl 2> /dev/null; then rm -rf k; fi
done
if [ -e k/train_state.safetensors ]; then "$lm" --resume k > /dev/null; else "$lm" $args --out k > /dev/null; fi
cmp ref/train_state.safetensors k/train_state.safetensors
cmp ref/lm.safetensors k/lm.safetensors
steps=$(sed -n 's/^{"step": \([0-9]*\),.*/\1/p' k/metrics.jsonl | tr '\n' ' ')
[ "$steps" = "$(seq -s ' ' 1 80) " ] || { echo "kill_resume: metrics.jsonl steps: $steps"; exit 1; }
echo "kill_resume: $kills kills, then resume: the same bytes as one run"
