#!/bin/sh
# Data-parallel scaling of gpt-small (bench's shape: V 256, T 128, 4 layers,
# 8 heads, d 256, batch 16 windows) trained by lm, on this machine:
#   1 rank x 1 thread, 1 rank x 2 threads, 2 ranks x 1 thread (mpirun, --ddp:
#   batch 8 per rank), and 2 ranks again with TG_DIST_NO_OVERLAP=1 (the whole
#   all-reduce after backward), for the overlap;
# then a model of multi-node scaling from these numbers. Prints a markdown
# section. Run by `make bench` (after an MPI=1 build); usage:
#   sh tools/bench_ddp.sh MPI_BUILD_DIR [STEPS] [REPS]
# The four kinds of run are interleaved REPS times, so that they share the
# machine's noise; the model takes the node's GFLOP/s from BENCHMARKS.md's
# gpt-small row at 2 threads when there is one (make bench's quiet
# measurement), else from the 1 rank x 2 threads run here.
set -eu
build=${1:-build/mpi}
steps=${2:-20}
reps=${3:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
load=$(cut -d' ' -f1-3 /proc/loadavg)
shape="--layers 4 --heads 8 --dim 256 --block 128 --batch 16 --lr 3e-4 --warmup 0 --eval-every 100000 --eval-batches 1 --tokens 0"
# The fortunes as a token file, once.
"$build/bin/lm" $shape --steps 1 --out "$work/prep" > "$work/prep.log" 2>&1
data="$work/prep/tokens.npy"
params=$(sed -n 's/.* \([0-9]*\) parameters;.*/\1/p' "$work/prep.log")
# ms per step of steps 4.. of one run's metrics log (B x T tokens a step), appended to $2.
ms() { sed -n 's/.*"step": \([0-9]*\),.*"tokens_per_s": \([^,]*\),.*/\1 \2/p' "$1" |
    awk '$1 > 3 { print 16 * 128 * 1000 / $2 }' >> "$2"; }
median() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]}'; }
# lm's "ddp: ..." line: ms a step waited for the all-reduce after backward, appended to $2.
wait_of() { sed -n 's/.*per step, \([0-9.]*\) ms per step waited.*/\1/p' "$1" >> "$2"; }
run() { name=$1; shift; env "$@" $shape --steps "$steps" --data "$data" --out "$work/$name" --overwrite > "$work/$name.log" 2>&1; ms "$work/$name/metrics.jsonl" "$work/$name.ms"; }
i=0
while [ $i -lt "$reps" ]; do
    run one1 "$build/bin/lm" --threads 1
    run one2 "$build/bin/lm" --threads 2
    run two1 mpirun -np 2 --oversubscribe "$build/bin/lm" --ddp --threads 1
    wait_of "$work/two1.log" "$work/two1.wait"
    run two1sync TG_DIST_NO_OVERLAP=1 mpirun -np 2 --oversubscribe "$build/bin/lm" --ddp --threads 1
    wait_of "$work/two1sync.log" "$work/two1sync.wait"
    i=$((i + 1))
done
m11=$(median "$work/one1.ms")
m12=$(median "$work/one2.ms")
m21=$(median "$work/two1.ms")
m21s=$(median "$work/two1sync.ms")
w=$(median "$work/two1.wait")
ws=$(median "$work/two1sync.wait")
# The node's speed for the model.
gf=$(sed -n 's/^| gpt-small | 2 | [^|]*| [^|]*| [^|]*| \([0-9.]*\) \/.*/\1/p' BENCHMARKS.md 2>/dev/null | head -1)
gf_from="BENCHMARKS.md's gpt-small at 2 threads"
if [ -z "$gf" ]; then
    gf=$(awk -v ms="$m12" 'BEGIN { printf "%.1f", 42.7 / (ms / 1000) }')
    gf_from="the 1 rank x 2 threads run above"
fi
buckets=$(sed -n 's/.*averaged in \([0-9]*\) buckets.*/\1/p' "$work/two1.log")

cat << EOF

## Data-parallel training (MPI): gpt-small on this machine

\`sh tools/bench_ddp.sh build/mpi $steps\` (run by \`make bench\`): lm with bench's gpt-small shape
(V 256, T 128, 4 layers, 8 heads, d 256, $params parameters, global batch 16 windows, AdamW),
$steps steps, median ms/step of steps 4..$steps over $reps interleaved runs of each; \`mpirun -np 2 --oversubscribe lm --ddp\`
gives each rank 8 windows and averages the gradients ($(awk -v p="$params" 'BEGIN{printf "%.1f", 4*p/1e6}') MB a step,
in $buckets buckets of 4 MiB, MPI_Iallreduce over shared memory). Load average before the runs: $load
(the 2 cores are shared with other work; the four kinds of run alternate, so they share its noise).

| run | ms/step | speed-up over 1 x 1 |
|---|---|---|
| 1 rank x 1 thread | $m11 | 1.00x |
| 1 rank x 2 threads | $m12 | $(awk -v a="$m11" -v b="$m12" 'BEGIN{printf "%.2fx", a/b}') |
| 2 ranks x 1 thread (--ddp) | $m21 | $(awk -v a="$m11" -v b="$m21" 'BEGIN{printf "%.2fx", a/b}') |
| 2 ranks x 1 thread, all-reduce after backward (TG_DIST_NO_OVERLAP=1) | $m21s | $(awk -v a="$m11" -v b="$m21s" 'BEGIN{printf "%.2fx", a/b}') |

Overlap: after backward a rank waited $w ms per step for the all-reduce when buckets
start during backward, against $ws ms when the whole all-reduce starts after it:
$(awk -v a="$w" -v b="$ws" 'BEGIN{ if (b > 0) printf "%.0f%%", 100 * (1 - a / b); else printf "n/a" }') of the communication was hidden behind backward. (On 2 cores the ranks
also wait for each other: a rank's wait includes the other's lag.)
On one machine the 2 ranks share the 2 cores that 1 rank x 2 threads uses,
and add the all-reduce and a second copy of the optimizer step: data
parallelism pays across machines, where each rank brings its own cores.
EOF

# The model: ring all-reduce (each node sends and receives 2(N-1)/N of the
# gradient bytes S, in 2(N-1) steps of latency a) against the step's
# compute at the GFLOP/s measured above (1 rank x 2 threads: a node like
# this one), for per-node batches of 16 windows (weak scaling) and for a
# fixed global batch of 256 windows split over N nodes (strong scaling).
awk -v P="$params" -v F="$gf" -v from="$gf_from" 'BEGIN {
    N = 16 * 128; d = 256; L = 4; T = 128
    G = (6 * N * (L * 12 * d * d + 256 * d) + 12 * 16 * T * T * d * L) / 1e9  # GFLOP a step (bench'"'"'s count)
    printf "\n### Multi-node scaling, on paper\n\n"
    printf "A node like this one: gpt-small, %.1f GFLOP a step of 16 x 128 tokens (bench'"'"'s count), at %.0f GFLOP/s (%s): %.0f ms a step. ", G, F, from, G / F * 1000
    printf "Gradients are 4 bytes a parameter: S = %.1f MB for gpt-small (%.2fM parameters), %.0f MB for a model 10x larger ", 4 * P / 1e6, P / 1e6, 40 * P / 1e6
    printf "(its compute taken as 10x too: 6 flops a parameter a token dominate). "
    printf "Ring all-reduce over N nodes: t = 2(N-1)/N * S / bandwidth + 2(N-1) * a, a = 20 us a message step; "
    printf "compute per step t_c = GFLOP / %.0f GFLOP/s. Without overlap a step takes t_c + t; with perfect overlap max(t_c, t).\n\n", F
    printf "| model | link | N | all-reduce ms | compute ms, 16 windows a node | compute ms, 256 windows over N nodes |\n|---|---|---|---|---|---|\n"
    split("10 100", gb, " "); split("2 10 100", ns, " ")
    for (m = 1; m <= 2; m++) for (k = 1; k <= 2; k++) for (j = 1; j <= 3; j++) {
        n = ns[j]; S = 4 * P * (m == 1 ? 1 : 10); bw = gb[k] * 1e9 / 8; g = G * (m == 1 ? 1 : 10)
        t = (2 * (n - 1) / n * S / bw + 2 * (n - 1) * 20e-6) * 1000
        printf "| %s | %s Gbit/s | %d | %.1f | %.1f | %.1f |\n", m == 1 ? "gpt-small" : "10x", gb[k], n, t, g / F * 1000, g * 16 / F * 1000 / n
    }
    printf "\nWhere communication dominates (the all-reduce takes longer than the compute it could hide behind):\n\n"
    for (m = 1; m <= 2; m++) for (k = 1; k <= 2; k++) {
        S = 4 * P * (m == 1 ? 1 : 10); bw = gb[k] * 1e9 / 8; g = G * (m == 1 ? 1 : 10)
        t100 = 2 * 0.99 * S / bw + 2 * 99 * 20e-6; strong = 0
        for (n = 2; n <= 256; n++) if (!strong && 2 * (n - 1) / n * S / bw + 2 * (n - 1) * 20e-6 > g * 16 / F / n) strong = n
        t256 = 2 * 255 / 256 * S / bw + 2 * 255 * 20e-6
        printf "- %s, %s Gbit/s: 16 windows a node: the all-reduce is %.1f%% of the compute at 100 nodes, never dominant; ", m == 1 ? "gpt-small" : "10x model", gb[k], 100 * t100 / (g / F)
        if (strong) printf "256 windows in all: dominant from %d nodes (%.1f windows, %.0f tokens a node)\n", strong, 256 / strong, 32768 / strong
        else printf "256 windows in all: not before the batch runs out (256 nodes of 1 window: %.0f%% of the compute)\n", 100 * t256 / (g * 16 / F / 256)
    }
    r10 = 4 * F * 1e9 / (3 * 1.25e9); r100 = r10 / 10
    printf "\nThe bandwidth term does not depend on the model size: 4 bytes a parameter to send against 6 flops a parameter a token, so "
    printf "communication / compute = (8 P / bandwidth) / (6 P tokens / F) = 4F / (3 bandwidth tokens_per_node) = %.0f / tokens_per_node at 10 Gbit/s ", r10
    printf "and %.0f / tokens_per_node at 100 Gbit/s on %.0f GFLOP/s nodes. Communication dominates once a node gets fewer than ~%.0f tokens a step at 10 Gbit/s ", r100, F, r10
    printf "(%.0f at 100 Gbit/s), whatever the model; a larger model only moves the point through the latency term 2(N-1)a, which matters for small models on many nodes (gpt-small at 100 nodes: %.1f ms of latency against %.1f ms of bandwidth at 100 Gbit/s). ", r100, 2 * 99 * 0.02, 2 * 0.99 * 4 * P / 12.5e9 * 1000
    printf "Faster nodes (GPUs: 100x the GFLOP/s) move the threshold 100x up, which is why GPU clusters need 100+ Gbit/s links, overlap, and large per-node batches.\n"
}'
