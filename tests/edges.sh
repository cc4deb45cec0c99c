#!/bin/sh
# The edges between the library and its programs (issue 33), run by make test:
#  1. nothing outside examples/ includes an example's header: what a tool,
#     a test or the library needs from an example belongs in the library;
#  2. every program (examples/*.c, tools/*.c), counted together with the
#     headers of examples/ and tools/ that only it includes (directly or
#     through another such header), is at most 400 lines: a program is a page
#     of flags and a call into the library. A header two programs include is
#     shared code and counts for neither (the rule of the before-stop hook).
# Prints each program over budget with its count, and fails when any is,
# except the programs in OVER below, which are known to be over and may not
# grow past the count written there (a ratchet: the count only comes down,
# and a program that reaches the budget leaves the list). They are issue 33's
# remaining debt, named in its closing note.
#   sh tests/edges.sh [budget]
set -u
cd "$(dirname "$0")/.." || exit 1
budget=${1:-400}
fail=0
# program:most lines allowed (the count when it was listed)
OVER=""

inc=$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*examples/' src tools tests 2> /dev/null)
if [ -n "$inc" ]; then
    echo "edges: files outside examples/ include an example's header:" $inc
    fail=1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The program's own headers: the quoted includes that are files of examples/
# or tools/, resolved against the including file's folder, recursively.
closure() { # file -> its headers, one a line, into $tmp/seen
    dir=$(dirname "$1")
    for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$1"); do
        p=$(realpath -m --relative-to=. "$dir/$h")
        case $p in examples/*.h | tools/*.h) ;; *) continue ;; esac
        [ -f "$p" ] || continue
        grep -qx "$p" "$tmp/seen" && continue
        echo "$p" >> "$tmp/seen"
        closure "$p"
        dir=$(dirname "$1")
    done
}
for prog in examples/*.c tools/*.c; do
    : > "$tmp/seen"
    closure "$prog"
    sort -u "$tmp/seen" > "$tmp/$(echo "$prog" | tr / _).h"
done
cat "$tmp"/*.h | sort | uniq -c | awk '$1 == 1 {print $2}' > "$tmp/own"
over=""
for prog in examples/*.c tools/*.c; do
    n=$(wc -l < "$prog")
    for h in $(grep -Fxf "$tmp/own" "$tmp/$(echo "$prog" | tr / _).h"); do n=$((n + $(wc -l < "$h"))); done
    [ "${EDGES_VERBOSE:-0}" = 1 ] && echo "$n $prog"
    cap=$budget
    for e in $OVER; do [ "${e%%:*}" = "$prog" ] && cap=${e##*:}; done
    if [ "$n" -gt "$cap" ]; then
        over="$over $prog ($n lines with its own headers)"
    elif [ "$cap" -gt "$budget" ]; then
        [ "$n" -le "$budget" ] && over="$over $prog (now $n lines: take it off OVER)"
        [ "$n" -gt "$budget" ] && echo "edges: known over budget: $prog ($n lines, at most $cap; budget $budget)"
    fi
done
if [ -n "$over" ]; then
    echo "edges: programs over $budget lines:$over"
    fail=1
fi
[ $fail = 0 ] && echo "edges: no example header outside examples/, every other program within $budget lines"
exit $fail
