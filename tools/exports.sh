#!/bin/sh
# The library's exported symbols: exactly the functions and variables that
# the public headers (those src/tgrad.h includes) declare, one a line, for
# objcopy --keep-global-symbols (the static library) and the version script
# (the shared one); every other symbol of the library stays internal. The
# compiler lists the functions (gcc -aux-info: every prototype it read, with
# its file; static inline ones are not the library's) and the preprocessed
# headers the extern variables (the flavour
# marker is a macro: the flavour's CFLAGS pick it).
#   sh tools/exports.sh CC "CFLAGS"
set -eu
cc=${1:-cc}
cflags=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include "tgrad.h"\n' > "$tmp/all.c"
# -aux-info is gcc's: another compiler (CC=clang) has gcc list them.
# shellcheck disable=SC2086
$cc $cflags -aux-info "$tmp/aux" -fsyntax-only "$tmp/all.c" 2> /dev/null ||
    gcc $cflags -aux-info "$tmp/aux" -fsyntax-only "$tmp/all.c"
{
    sed -n 's|^/\* src/[^ ]*:[0-9]*:N[CF] \*/ extern .*[ *]\(tg_[A-Za-z0-9_]*\) *(.*|\1|p' "$tmp/aux"
    # shellcheck disable=SC2086
    $cc $cflags -E "$tmp/all.c" | awk '
        /^# [0-9]+ "/ { file = $3; next }
        file ~ /^"src\// && /^extern / && !/\(/ {
            if (match($0, /tg_[A-Za-z0-9_]+[ ]*(\[|;)/)) { s = substr($0, RSTART, RLENGTH); sub(/[ ]*(\[|;)$/, "", s); print s }
        }'
} | sort -u
