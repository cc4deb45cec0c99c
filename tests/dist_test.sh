#!/bin/sh
# The distributed tests (make test MPI=1): lm and reverse under
# `mpirun -np 2 --oversubscribe` against one process, resuming across rank
# counts, a rank that dies or hangs, and rank 0's single-rank work (saving,
# sampling) outlasting the collectives' deadline.
#   sh tests/dist_test.sh BUILD [DOUBLE_BUILD]     (build/mpi build/mpi-double)
#
# Equivalence. 2 ranks with batch B/2 each average their gradients; one
# process sums over B. Equal in exact arithmetic; in floating point each
# rank's GEMMs add half the rows and the halves are then added (and the
# means are of B/2 rows, halved), so results differ by rounding: not
# bit-identical. The losses and gradient norms of every step must agree to
# LM_TOL: float rounding (2^-24 relative, a few units of it per step
# through 20 AdamW steps: we see at most 2.4e-7 on losses of 3 to 5.5) is
# far below 1e-4, while a wrong shard, a missing average or another batch
# moves them by 1e-3 or more (the gradient norm doubles without the
# division by N). In double, 1e-9. With --dropout 0.1 the ranks' masks are
# slices of the single-process masks (tg_dropout_set_shard, which
# tg_dist_init sets for every program), and the losses agree to
# rounding too, though a loss spike (a gradient norm of 100 at step 20)
# amplifies it to 3e-5: 1e-3 there, on the losses alone, still far below
# the 1e-2 that other masks move the first step's loss.
set -u
BUILD=${1:-build/mpi}
DBUILD=${2:-}
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mktemp -d "${TMPDIR:-/tmp}/tgrad-dist.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
# Open MPI refuses root without these (CI runs as root), and 2 ranks may
# outnumber the cores it counts.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="timeout 300 mpirun -np 2 --oversubscribe"
fails=0
passes=0
ok() { passes=$((passes + 1)); echo "dist: PASS: $*"; }
bad() { fails=$((fails + 1)); echo "dist: FAIL: $*"; }

# loss and grad_norm of every step of a metrics log, one "loss gn" per line.
cols() { sed -n 's/.*"loss": \([^,]*\),.*"grad_norm": \([^}]*\)}.*/\1 \2/p' "$1"; }
# The largest |difference| between two such files (inf when a line is missing).
maxdiff() {
    paste -d' ' "$1" "$2" | awk 'NF != 4 { print "inf"; exit }
        { for (i = 1; i <= 2; i++) { d = $i - $(i + 2); if (d < 0) d = -d; if (d > m) m = d } }
        END { if (NR == 0) print "inf"; else printf "%.3g\n", m }'
}
within() { awk -v d="$1" -v t="$2" 'BEGIN { exit !(d != "inf" && d + 0 <= t + 0) }'; }

# $1 build, $2 tolerance, $3 label, $4 more flags: 2 ranks (--batch 32 is
# the global batch) against one process, 20 steps of lm's default model on
# the fortunes.
lm_equivalence() {
    b=$1 tol=$2 label=$3
    d="$OUT/lm-$label"
    mkdir -p "$d"
    common="--steps 20 --threads 1 --tokens 10 ${4:-}"
    if ! $MPIRUN "$b/bin/lm" --ddp $common --out "$d/two" > "$d.two.log" 2>&1; then
        bad "lm ($label): mpirun -np 2 lm --ddp failed:"; tail -5 "$d.two.log"; return
    fi
    if ! "$b/bin/lm" $common --out "$d/one" > "$d.one.log" 2>&1; then
        bad "lm ($label): lm failed:"; tail -5 "$d.one.log"; return
    fi
    cols "$d/two/metrics.jsonl" > "$d.two"
    cols "$d/one/metrics.jsonl" > "$d.one"
    if [ -n "${4:-}" ]; then # the losses alone (the gradient norms spike with dropout)
        for f in "$d.two" "$d.one"; do awk '{ print $1, 0 }' "$f" > "$f.l" && mv "$f.l" "$f"; done
    fi
    m=$(maxdiff "$d.two" "$d.one")
    v2=$(sed -n 's/^val_loss=//p' "$d.two.log")
    v1=$(sed -n 's/^val_loss=//p' "$d.one.log")
    dv=$(awk -v a="$v2" -v b="$v1" 'BEGIN { d = a - b; print (a == "" || b == "" ? "inf" : d < 0 ? -d : d) }')
    # val_loss is printed to 4 decimals: equal up to one unit of the last.
    if [ "$(wc -l < "$d.two")" -eq 20 ] && within "$m" "$tol" && within "$dv" 0.0001; then
        ok "lm ($label): 2 ranks x batch 16 = 1 process x batch 32: 20 losses$([ -z "${4:-}" ] && echo " and gradient norms") within $m (tolerance $tol), val_loss $v2 both"
    else
        bad "lm ($label): 2 ranks vs 1 process: max difference $m (tolerance $tol), val_loss '$v2' vs '$v1'"
    fi
}

# A training state written by N ranks resumes on M (10 steps, then 10 more).
lm_resume() {
    b=$1 tol=$2
    d="$OUT/resume"
    common="--steps 20 --threads 1 --tokens 10"
    one="$OUT/lm-float.one"
    $MPIRUN "$b/bin/lm" --ddp $common --stop-after 10 --out "$d/a" > "$d.a1.log" 2>&1 &&
        "$b/bin/lm" --resume "$d/a/train_state.safetensors" --threads 1 --tokens 10 --out "$d/a" > "$d.a2.log" 2>&1
    rc_a=$?
    "$b/bin/lm" $common --stop-after 10 --out "$d/b" > "$d.b1.log" 2>&1 &&
        $MPIRUN "$b/bin/lm" --ddp --resume "$d/b/train_state.safetensors" --threads 1 --tokens 10 --out "$d/b" \
            > "$d.b2.log" 2>&1
    rc_b=$?
    cols "$d/a/metrics.jsonl" > "$d.a"
    cols "$d/b/metrics.jsonl" > "$d.b"
    ma=$(maxdiff "$d.a" "$one")
    mb=$(maxdiff "$d.b" "$one")
    if [ $rc_a -eq 0 ] && within "$ma" "$tol"; then
        ok "lm: written by 2 ranks at step 10, resumed by 1: steps 1-20 within $ma of one process"
    else
        bad "lm: 2 ranks -> 1 (exit $rc_a): max difference $ma"; tail -3 "$d.a1.log" "$d.a2.log"
    fi
    if [ $rc_b -eq 0 ] && within "$mb" "$tol"; then
        ok "lm: written by 1 rank at step 10, resumed by 2: steps 1-20 within $mb of one process"
    else
        bad "lm: 1 rank -> 2 (exit $rc_b): max difference $mb"; tail -3 "$d.b1.log" "$d.b2.log"
    fi
}

# reverse: the last step's loss (4 decimals) and the held-out accuracy;
# $2 steps, $3 more flags, $4 label. With dropout (reverse's default 0.1)
# 50 steps: the masks are the single-process ones too, but rounding grows
# fast once the model finds the task (5e-4 apart at step 200).
reverse_equivalence() {
    b=$1 n=$2
    d="$OUT/reverse-$4"
    common="--pe fixed --steps $n --threads 1 --heldout 200 $3"
    $MPIRUN "$b/bin/reverse" --ddp $common --out "$d/two" > "$d.two.log" 2>&1
    rc2=$?
    "$b/bin/reverse" $common --out "$d/one" > "$d.one.log" 2>&1
    rc1=$?
    l2=$(sed -n "s/.*step *$n\/$n  loss \([0-9.]*\).*/\1/p" "$d.two.log")
    l1=$(sed -n "s/.*step *$n\/$n  loss \([0-9.]*\).*/\1/p" "$d.one.log")
    a2=$(sed -n 's/^fixed *\([0-9.]*%\).*/\1/p' "$d.two.log")
    a1=$(sed -n 's/^fixed *\([0-9.]*%\).*/\1/p' "$d.one.log")
    dl=$(awk -v a="$l2" -v b="$l1" 'BEGIN { d = a - b; print (d < 0 ? -d : d) }')
    if [ $rc2 -eq 0 ] && [ $rc1 -eq 0 ] && [ -n "$l1" ] && [ -n "$l2" ] && within "$dl" 0.0002 && [ -f "$d/two/reverse_fixed.safetensors" ]; then
        ok "reverse ($4): 2 ranks vs 1 process, $n steps: loss $l2 vs $l1, held-out token accuracy $a2 vs $a1"
    else
        bad "reverse ($4): 2 ranks (exit $rc2) vs 1 process (exit $rc1): loss '$l2' vs '$l1'"; tail -3 "$d.two.log"
    fi
}

# A rank that fails (TG_DIST_FAULT=$2: R:K:exit|hang, at its K-th
# all-reduce or at a barrier): the run must end, non-zero, in bounded time,
# with a line matching $3. $4 describes it; $5, optional, is an environment
# setting for mpirun.
rank_failure() {
    b=$1 fault=$2 want=$3 what=$4
    log="$OUT/fault-$(echo "$fault" | tr ':' '-').log"
    start=$(date +%s)
    env ${5:-} TG_DIST_TIMEOUT_S=3 TG_DIST_FAULT=$fault timeout 120 mpirun -np 2 --oversubscribe "$b/tests/lm-hooks" --ddp \
        --steps 50 --threads 1 --tokens 10 --out "$OUT/fault" > "$log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $secs -lt 60 ] && grep -q -E "$want" "$log"; then
        ok "$what: the run ends in ${secs} s, exit $rc, with \"$(grep -m1 -E "$want" "$log" | cut -c1-110)\""
    else
        bad "$what: exit $rc after ${secs} s; log:"; tail -8 "$log"
    fi
}

# Rank 0 alone writes the corpus, then the checkpoints, figures and the
# sample, while the other ranks wait for it at a barrier: a healthy run
# whose single-rank work outlasts the collectives' deadline must finish.
# TG_DIST_SLOW_LEAD_S=4 makes rank 0 take 4 s more before each barrier,
# under a deadline of 2 s. (While the barrier held every rank to the
# deadline, rank 1 gave up after 2 s and aborted the run.)
slow_lead() {
    b=$1
    start=$(date +%s)
    TG_DIST_TIMEOUT_S=2 TG_DIST_SLOW_LEAD_S=4 $MPIRUN "$b/tests/lm-hooks" --ddp --steps 5 --threads 1 --tokens 10 \
        --out "$OUT/slow" > "$OUT/slow.log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    n=$(grep -c "TG_DIST_SLOW_LEAD_S" "$OUT/slow.log")
    if [ $rc -eq 0 ] && [ "$n" -ge 2 ] && grep -q '^val_loss=' "$OUT/slow.log" && [ -f "$OUT/slow/lm.safetensors" ]; then
        ok "lm --ddp with rank 0's single-rank work 4 s longer ($n times) than the 2 s deadline: finishes in ${secs} s, $(grep '^val_loss=' "$OUT/slow.log")"
    else
        bad "lm --ddp with a slow rank 0 (TG_DIST_SLOW_LEAD_S=4, TG_DIST_TIMEOUT_S=2): exit $rc after ${secs} s; log:"
        tail -8 "$OUT/slow.log"
    fi
}

if ! command -v mpirun > /dev/null; then
    echo "dist: mpirun not found (make MPI=1 installs openmpi-bin)"
    exit 1
fi
cd "$SRC" || exit 1
mkdir -p "$OUT/lm-float" "$OUT/lm-double" "$OUT/resume"
lm_equivalence "$BUILD" 1e-4 float
[ -n "$DBUILD" ] && lm_equivalence "$DBUILD" 1e-9 double
lm_equivalence "$BUILD" 1e-3 float-dropout "--dropout 0.1"
lm_resume "$BUILD" 1e-4
reverse_equivalence "$BUILD" 200 "--dropout 0" no-dropout
reverse_equivalence "$BUILD" 50 "" dropout
rank_failure "$BUILD" 1:5:exit "exited with non-zero status" "a rank that exits mid-run"
rank_failure "$BUILD" 1:5:hang "did not complete within 3 s \(a rank may have died\)" "a rank that hangs mid-run"
slow_lead "$BUILD"
# The barrier keeps its deadline on rank 0, which waits only for ranks that
# have nothing else to do...
rank_failure "$BUILD" 1:barrier:hang "rank 0: barrier did not complete within 3 s" \
    "rank 1 hanging at a barrier (rank 0 waits with the deadline)"
# ...and the others, waiting without one, still notice rank 0 die: mpirun
# ends the job, and when told not to (orte_abort_on_non_zero_status 0, Open
# MPI 4), the waiting rank sees rank 0's pid gone and aborts the run itself.
rank_failure "$BUILD" 0:barrier:exit "exited with non-zero status" "rank 0 exiting in its single-rank work"
rank_failure "$BUILD" 0:barrier:exit "rank 1: barrier: rank 0 \(pid [0-9]+\) died while this rank waited" \
    "rank 0 exiting in its single-rank work, mpirun not ending the job" OMPI_MCA_orte_abort_on_non_zero_status=0
if $MPIRUN "$BUILD/bin/lm" --ddp --batch 31 --steps 1 --out "$OUT/odd" > "$OUT/odd.log" 2>&1 ||
    ! grep -q "ranks must divide it" "$OUT/odd.log"; then
    bad "lm --ddp --batch 31 on 2 ranks should fail with 'ranks must divide it'"; tail -3 "$OUT/odd.log"
else
    ok "lm --ddp --batch 31 on 2 ranks: refused (the ranks must divide the global batch)"
fi
echo "dist: Synthesis: Tested: $((passes + fails)) | Passing: $passes | Failing: $fails"
[ $fails -eq 0 ]
