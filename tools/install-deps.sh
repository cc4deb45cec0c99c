#!/bin/sh
# Installs Debian packages, only those that are missing, so that `make test`,
# `make demo` and `make bench` work as the first commands on a fresh machine:
# the Makefile runs it before they compile anything (its deps target; `make
# deps` runs it alone). Plain `make` never does, and NO_DEPS=1 turns those
# runs off. Uses sudo when not root. With no arguments, the packages tgrad
# needs (docs/DESIGN.md, "Dependencies"):
#   libcriterion-dev  tests        libstb-dev         PNG writing/reading
#   fonts-dejavu-core figure text  pkg-config, cmake  the install test
#   valgrind          the leak test of the programs (tests/test_hostile.c)
#   fortunes          English text, the language model's default corpus
#                     (/usr/share/games/fortunes; pulls in fortunes-min)
#   doxygen           the API reference (make docs, run by make test)
# With arguments, those packages instead (tools/install-bench-deps.sh; the
# Makefile's deps with MPI=1 and for make bench: libopenmpi-dev openmpi-bin;
# fuzz-deps, for make fuzz: clang libclang-rt-14-dev libstb-dev; format and
# format-check: clang-format; docs: doxygen).
set -e
PKGS="${*:-libcriterion-dev libstb-dev fonts-dejavu-core pkg-config cmake valgrind fortunes doxygen}"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "tools/install-deps.sh: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
