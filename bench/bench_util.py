"""Helpers shared by the bench scripts that run tgrad's programs next to PyTorch:
the repository's paths, running a program, and safetensors files read and
written by hand (Debian 12 packages no python3-safetensors).

The safetensors format (src/io/safetensors.h): 8 bytes of header length
(little-endian), a JSON header (name -> dtype, shape, data_offsets;
"__metadata__" -> strings) and the raw little-endian data.
"""
import argparse
import contextlib
import json
import os
import struct
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = os.path.join(ROOT, "tests", "data", "fortunes_excerpt.txt")
DTYPES = {"F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16, "F16": torch.float16}
NAMES = {v: k for k, v in DTYPES.items()}
INTS = {2: torch.int16, 4: torch.int32, 8: torch.int64}  # a tensor's bits (numpy has no bfloat16)


def programs(build, *names):
    """The paths of tgrad's programs in a build directory (build/bin/NAME)."""
    return tuple(os.path.join(ROOT, build, "bin", n) for n in names)


def script_args(doc, names, *flags):
    """A bench script's flags: --build (where the programs `names` are), then
    each of `flags` as (name, type, default, help); with --threads among
    them, torch runs on that many. The parsed flags and the programs' paths."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--build", default="build",
                    help="tgrad's build directory (" + ", ".join("build/bin/" + n for n in names) + ")")
    for name, typ, default, what in flags:
        ap.add_argument(name, type=typ, default=default, help=what)
    a = ap.parse_args()
    if "threads" in vars(a):
        torch.set_num_threads(a.threads)
    return a, programs(a.build, *names)


@contextlib.contextmanager
def section(title, what):
    """A BENCHMARKS.md section: its heading (with torch's version), the command
    that wrote it and what it measures, then a code block around the body,
    which gets a temporary directory to work in."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)
    print(f"## {title} (torch {torch.__version__})\n")
    print(f"`/usr/bin/python3 {script}`: {what}\n\n```")
    with tempfile.TemporaryDirectory() as work:
        yield work
    print("```")


def run(cmd):
    """The output (stdout and stderr) of cmd; exits, naming the script, when cmd fails."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        who = os.path.splitext(os.path.basename(sys.argv[0]))[0]
        sys.exit(f"{who}: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}")
    return p.stdout


def load_safetensors(path):
    """A safetensors file as {name: tensor}, dtypes kept."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name != "__metadata__":
            a, b = info["data_offsets"]
            t = torch.frombuffer(bytearray(data[a:b]), dtype=DTYPES[info["dtype"]]) if b > a else \
                torch.empty(0, dtype=DTYPES[info["dtype"]])
            out[name] = t.reshape(info["shape"])
    return out


def save_safetensors(tensors, path, metadata=None):
    """{name: tensor} as a safetensors file, each in its own dtype (the bytes through an integer view)."""
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        b = t.view(INTS[t.element_size()]).numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def safetensors_metadata(path):
    """The "__metadata__" strings of a safetensors file ({} when it has none)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)).get("__metadata__", {})
