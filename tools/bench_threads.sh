#!/bin/sh
# The README's training loop as a user would build it (installed-library
# style: its own program linked with libtgrad), at a size where the
# parallel loops matter (V 32, T 64, B 32, d 128, FFN 256, 60 steps), timed
#   alone at 1 thread, alone at the default thread count (all cores), and
#   two copies at once, both at 1 thread and both at the default count.
# Prints a markdown section (medians of REPS runs, seconds). Run by
# `make bench` after tools/bench; usage: bench_threads.sh BUILD_DIR [REPS]
set -eu
build=${1:-build}
reps=${2:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The first C block after the heading "## Your own training loop".
awk '/^## Your own training loop/{sec=1} sec && /^```c$/{on=1; next} on && /^```$/{exit} on' README.md |
    sed -e 's/V = 8, T = 6, B = 32, D = 16/V = 32, T = 64, B = 32, D = 128/' -e 's/ffn_hiddens = 32/ffn_hiddens = 256/' \
        -e 's/tg_run_defaults("copy_run", 300)/tg_run_defaults("copy_run", 60)/' -e 's/eval_every = 100/eval_every = 60/' \
        > "$work/loop.c"
grep -q "tg_run_step" "$work/loop.c" || { echo "bench_threads.sh: no training loop found in README.md" >&2; exit 1; }
cc -O2 -std=c11 -Isrc "$work/loop.c" "$build/libtgrad.a" -lm -pthread -o "$work/loop"
# Each copy runs in a folder of its own (the loop's run folder, copy_run, is
# relative), starting afresh each time.
mkdir "$work/a" "$work/b"
(cd "$work/a" && ../loop > /dev/null) || { echo "bench_threads.sh: the training loop failed" >&2; exit 1; }
now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'; }
in_dir() { (cd "$work/$1" && rm -rf copy_run && shift && env "$@" ../loop > /dev/null 2>&1); }
one() { t0=$(now); in_dir a "$@"; echo "$(now) - $t0" | bc; }
pair() { t0=$(now); in_dir a "$@" & in_dir b "$@"; wait; echo "$(now) - $t0" | bc; }
# The four kinds of run interleaved, so that they share the machine's noise.
i=0
while [ $i -lt "$reps" ]; do
    one TG_NUM_THREADS=1 >> "$work/a1"
    one TG_NUM_THREADS= >> "$work/ad"
    pair TG_NUM_THREADS=1 >> "$work/p1"
    pair TG_NUM_THREADS= >> "$work/pd"
    i=$((i + 1))
done
a1=$(median < "$work/a1")
ad=$(median < "$work/ad")
p1=$(median < "$work/p1")
pd=$(median < "$work/pd")
cat <<MD

## A user's training loop and threads

The README's training loop ("Your own training loop") scaled to V 32,
T 64, B 32, d 128, FFN 256, 60 steps, compiled as a user would and linked
with \`$build/libtgrad.a\`; seconds, median of $reps runs
(\`sh tools/bench_threads.sh $build $reps\`; the four kinds of run
interleaved). The default thread count is every CPU ($(nproc) here) that
other programs' threads leave free, read every 10 ms as OpenMP's
OMP_DYNAMIC does; libtgrad's own pool spins up to 200 microseconds while
its threads have free cores and a microsecond or two otherwise, then
sleeps, and a share of a loop that no worker has started is run by the
caller, so the default is never the slow choice.

| run | 1 thread | default threads |
|---|---|---|
| alone | $a1 | $ad |
| two copies at once (wall time for both) | $p1 | $pd |
MD
