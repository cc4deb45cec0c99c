#!/bin/sh
# Installs what `make bench` needs to compare tgrad with PyTorch, only the
# Debian packages that are missing; uses sudo when not root. If this fails,
# the bench still runs and reports tgrad's numbers alone.
#   python3-torch         PyTorch, run by bench/torch_ref.py with /usr/bin/python3
#   python3-numpy         which PyTorch imports
#   libopenblas0-pthread  Debian's PyTorch does its matmuls through libblas.so.3;
#                         without OpenBLAS that is the reference BLAS, ~15x slower,
#                         and the comparison would not be with PyTorch at its best
set -e
PKGS="python3-torch python3-numpy libopenblas0-pthread"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "tools/install-bench-deps.sh: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
