#!/bin/sh
# Installs what `make bench` needs to compare tgrad with PyTorch, only the
# Debian packages that are missing. If this fails, the bench still runs and
# reports tgrad's numbers alone.
#   python3-torch         PyTorch, run by bench/torch_ref.py with /usr/bin/python3
#   python3-numpy         which PyTorch imports
#   libopenblas0-pthread  Debian's PyTorch does its matmuls through libblas.so.3;
#                         without OpenBLAS that is the reference BLAS, ~15x slower,
#                         and the comparison would not be with PyTorch at its best
exec sh "$(dirname "$0")/install-deps.sh" python3-torch python3-numpy libopenblas0-pthread
