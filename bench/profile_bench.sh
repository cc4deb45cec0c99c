#!/bin/sh
# BENCHMARKS.md's section "Where the time goes": the library's profiler
# (src/tensor/profile.h) over toy, gpt-mini and gpt-small at 1 and 2
# threads (bench --profile), and the model of what 16 threads will do,
# written from the split counts the code has (make bench appends it).
#   sh bench/profile_bench.sh BUILD_DIR >> BENCHMARKS.md
set -eu
build=${1:-build}
bench="$build/bin/bench"
cpu=$(lscpu 2> /dev/null | sed -n 's/^Model name: *//p' | head -1)
cat << EOF

## Where the time goes: the profiler, per op (\`bench --profile\`)

$(date -u '+%Y-%m-%d %H:%M UTC'), ${cpu:-unknown CPU}, $(nproc) cores online, load average at the start
$(cut -d' ' -f1-3 /proc/loadavg). Each table is \`$bench --workload W --threads N --profile\`
over the timed steps: a row is an op and direction (or a region: the optimizer's step, a batch),
its self time (the rows add up to the step), the part of it that ran on one thread ("of which 1
thread", microseconds a call: outside any pool job split over 2 threads or more), the threads'
average occupancy during it, the time the calling thread waited at the end of pool jobs, and
GFLOP/s and GB/s from flops and bytes estimated from the shapes (src/tensor/profile.h says how).
The header line sums the one-thread time of the library's rows: the part of a step that more
cores cannot shorten. On a machine shared with other programs the times move from run to run;
the calls, the one-thread column and the splits are what to read here.
EOF
for w in toy gpt-mini gpt-small; do
    case $w in
        toy) s=30 u=5 ;;
        gpt-mini) s=8 u=2 ;;
        *) s=4 u=1 ;;
    esac
    for t in 1 2; do
        printf '\n### %s, %s thread%s\n\n' "$w" "$t" "$([ "$t" = 1 ] || echo s)"
        "$bench" --workload $w --threads $t --steps $s --warmup $u --profile | sed -n '/^profile:/,/^workload=/p' |
            sed '/^workload=/d'
    done
done
cat << 'EOF'

### What 16 threads will do (a model: no 16-core machine was lent)

Every op of a step and its split, with the independent pieces it has at gpt-small's shapes
(B 16, T 128, d 256, 8 heads, 4 layers, V 256: N = B T = 2048 rows) and gpt2's (B 1, T 1024,
d 768, 12 heads, V 50257). Each piece writes outputs no other piece writes, or partial sums
combined in an order fixed by the shapes, so the bits are the same at any thread count
(tests/test_splits.c checks 1, 2, 3 and 7 threads).

| op | split | pieces, gpt-small | pieces, gpt2 | expected at 16 threads |
|---|---|---|---|---|
| affine, affine_gelu_tanh, matmul (the GEMMs) | C's 6-row tiles or 32-column slivers, whichever keeps shares full (src/tensor/gemm.c); never K | forward 342 row tiles; dW = dy^T x: out/6 = 43-171 tiles | 171 tiles (N 1024), dW 128-512 | about 90% from the pieces (43 tiles on 16 threads: shares of 2 and 3); each K block of a product is 2 pool jobs, so a product pays about 2 ceil(K/KC) hand-overs |
| attention (fused) forward | (batch x head) x query block | 128 x 2 = 256 | 12 x 16 = 192 | even: a causal row's cost grows with its position, tasks are handed out one at a time |
| attention backward | D rows; dQ per query block; dK, dV per key block | 256 each | 192 each | as forward; the gradient of the packed qkv is now zeroed in ranges |
| layer_norm forward, dx | rows | 2048 | 1024 | memory-bound: limited by bandwidth, not threads |
| layer_norm dgamma, dbeta | 128-row chunks x 64 columns, chunk sums in order | 16 x 4 = 64 | 8 x 12 = 96 | even |
| cross_entropy forward, backward | rows (the gradient zeroed per row) | 2048 rows of 256 | 1024 rows of 50257 | even |
| gather_rows (embedding) forward | rows | 2048 | 1024 | memory-bound |
| gather_rows backward | id mod 16 x 64 columns, positions in order | 16 x 4 = 64 | 16 x 12 = 192 | even when the ids spread over the buckets |
| add, sub backward (residuals, broadcast) | ranges; broadcast: 128-row chunks x 64 columns | ranges; wpe [1, T, d] from 16 rows: 1 x 512 | ranges | memory-bound |
| optimizer step (AdamW) | ranges of each parameter | one job per parameter: 52 | 148 | the big matrices split; each small one (biases, norms) runs alone, a job of its own |
| backward walk, batch | one thread | - | - | tens of microseconds a step |

So at 16 threads the step is, to first order, T16 = S + (T1 - S) / (16 e) + J h, with S the
one-thread time of the profile's header (at 2 threads, after these splits: below 1% of a
gpt-small step), e the GEMMs' share efficiency (about 0.9 from the tile counts above), J the
pool jobs a step (the header's count) and h one hand-over at 16 threads. h is the number this
model cannot measure on 2 cores: a job wakes or signals 15 workers through one claim word, and
at 1-2 microseconds a hand-over (tools/pool_costs, 2 threads) a gpt-small step's J of about
1000 jobs costs 1-2 ms, against T1 / 16 = 27 ms of work (the 440 ms step of issue 32 at one
thread): about 5%, so 16 threads should give about 12x on gpt-small, if the memory-bound ops
(layer norm, the adds, AdamW: about 10% of the step at 1 thread) scale with the cores' share of
the memory bandwidth. gpt-mini's step (83 ms) has a fifth of the work in about the same number
of jobs, so its hand-overs weigh 4-5 times more: about 8x. toy's step (8.8 ms) is hand-over
bound: 4x needs h below a microsecond. These are the issue's goals; whether they hold is for a
run on the 16-core machine to say.
EOF
