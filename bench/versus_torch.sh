#!/bin/sh
# tgrad against a PyTorch on the machine this runs on, at any thread count:
# each row (workload, threads, precision) is measured ROUNDS times, tgrad and
# then PyTorch with the same steps, rows interleaved within a round so that a
# noisy minute lands on one round of each; printed as a markdown table of the
# medians of the rounds (each round's figure is the program's own median
# step), with peak RSS and the engine bf16 products ran on.
#
# bench/compare.py (what `make bench` runs) is the table at 1 and 2 threads
# with /usr/bin/python3; this is for the other machines: a many-core server
# and whatever PyTorch it has (`python3` with a current torch), e.g.
#
#   sh bench/versus_torch.sh build python3 3 gemm-1024:1 gpt-small:1 gpt-small:16 gpt2:16:3
#
# A row is WORKLOAD:THREADS[:STEPS]; each is measured in fp32 and in bf16
# (tgrad --precision bf16; PyTorch autocast, or bf16 tensors for gemm-n).
# STEPS: timed steps (default: the workload's), after 2 warm-up steps (gpt2:
# 1, batch 2). PyTorch's threads are set as bench/compare.py sets them
# (OMP/MKL/OPENBLAS_NUM_THREADS, torch.set_num_threads), OPENBLAS_CORETYPE
# unset. With VERSUS_PARTIAL=FILE the table so far is written there after
# each round (a run cut short keeps its finished rounds).
set -u
[ $# -ge 4 ] || { echo "usage: sh bench/versus_torch.sh BUILD PYTHON ROUNDS WORKLOAD:THREADS[:STEPS] ..." >&2; exit 2; }
build=$1 py=$2 rounds=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
val() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" "$2" | tail -n 1; }
least() { if [ -f "$1" ]; then sort -n "$1" | awk 'NR == 1 {printf ($1 < 10 ? "%.3f" : "%.1f"), $1}'; else printf -; fi; }
median() { # of an even count, the mean of the middle two
    if [ -f "$1" ]; then
        sort -n "$1" | awk '{a[NR]=$1} END {v = NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; printf (v < 10 ? "%.3f" : "%.1f"), v}'
    else printf -; fi
}

# One program's run of a row into $work/<row>.<side>.<round>; its ms_per_step,
# min_ms and rss_peak_mb appended to the row's lists.
measure() { # side workload threads precision steps round
    side=$1 w=$2 t=$3 p=$4 s=$5 r=$6
    key="$w.$t.$p.$side"
    extra="--warmup 2"
    [ "$w" = gpt2 ] && extra="--warmup 1 --batch 2"
    [ -n "$s" ] && extra="$extra --steps $s"
    log="$work/$key.$r"
    if [ "$side" = tgrad ]; then
        "$build/bin/bench" --workload "$w" --threads "$t" --precision "$p" $extra > "$log" 2>&1
    else
        env -u OPENBLAS_CORETYPE OMP_NUM_THREADS="$t" MKL_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" \
            "$py" bench/torch_ref.py --workload "$w" --threads "$t" --precision "$p" $extra > "$log" 2>&1
    fi
    ms=$(val ms_per_step "$log")
    if [ -z "$ms" ]; then
        echo "versus_torch.sh: $side $w at $t threads ($p) failed:" >&2
        tail -n 3 "$log" >&2
        return
    fi
    echo "$ms" >> "$work/$key.ms"
    val min_ms "$log" >> "$work/$key.min"
    val rss_peak_mb "$log" >> "$work/$key.rss"
    [ "$side" = tgrad ] && [ "$p" = bf16 ] && echo "$(val bf16_engine "$log") $(val engine_gflops "$log")" > "$work/$key.engine"
    [ "$side" = torch ] && val torch "$log" > "$work/torch_version"
    echo "  round $r: $side $w $t threads $p: $ms ms a step" >&2
}

table() { # rounds-done row ...
    done_rounds=$1
    shift
    cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
    echo
    echo "tgrad against PyTorch $(cat "$work/torch_version" 2>/dev/null || echo '?') on $cpu ($(nproc) CPUs online):"
    echo "ms a step, the median of $done_rounds rounds (each the program's median step; the fastest round's min in brackets),"
    echo "\`sh bench/versus_torch.sh $build $py $rounds $*\`."
    echo
    echo "| workload | threads | precision | tgrad ms | PyTorch ms | PyTorch / tgrad | peak RSS MB tgrad / PyTorch | bf16 engine, its measured GFLOP/s |"
    echo "|---|---|---|---|---|---|---|---|"
    for row in "$@"; do
        w=${row%%:*} rest=${row#*:}
        t=${rest%%:*}
        for p in fp32 bf16; do
            k="$work/$w.$t.$p"
            tg=$(median "$k.tgrad.ms") pt=$(median "$k.torch.ms")
            tgmin=$(least "$k.tgrad.min") ptmin=$(least "$k.torch.min")
            ratio=$(awk -v a="$pt" -v b="$tg" 'BEGIN {if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else printf "-"}')
            rss="$(median "$k.tgrad.rss") / $(median "$k.torch.rss")"
            eng=$(cat "$k.tgrad.engine" 2>/dev/null)
            echo "| $w | $t | $p | $tg ($tgmin) | $pt ($ptmin) | $ratio | $rss | ${eng:--} |"
        done
    done
}

r=1
while [ "$r" -le "$rounds" ]; do
    for row in "$@"; do
        w=${row%%:*} rest=${row#*:}
        t=${rest%%:*} s=
        [ "$rest" != "$t" ] && s=${rest#*:}
        for p in fp32 bf16; do
            measure tgrad "$w" "$t" "$p" "$s" "$r"
            measure torch "$w" "$t" "$p" "$s" "$r"
        done
    done
    [ -n "${VERSUS_PARTIAL:-}" ] && table "$r" "$@" > "$VERSUS_PARTIAL"
    r=$((r + 1))
done
table "$rounds" "$@"

