#!/usr/bin/python3
"""bfloat16 and float16 checkpoints between tgrad and PyTorch, both ways, bit for bit.

    /usr/bin/python3 bench/bf16_roundtrip.py [--build build]

Run by `make bench` (appended to BENCHMARKS.md), never by `make test`.

1. tgrad -> PyTorch. `bench --workload gpt-mini --save-init` writes the GPT's
   initial float32 weights; `inspect --convert --dtype BF16` (and F16) writes
   them again from tgrad as bfloat16 (float16). PyTorch reads those files as
   torch.bfloat16 (torch.float16) tensors and compares every bit with its own
   rounding of the float32 weights, w.to(torch.bfloat16) (w.half()): both
   round to nearest, ties to even.
2. PyTorch -> tgrad. nanoGPT's GPT (bench/torch_ref.py) in bfloat16, plus a
   tensor of special values (+-inf, NaN, -0, subnormals, the largest bf16),
   saved by PyTorch as BF16 (and F16); `inspect --convert --dtype F32` reads
   them in tgrad and writes float32, which must equal PyTorch's .float() of
   the same tensors bit for bit (NaN as NaN).

Exits 1 on any difference.
"""
import os
import sys

import torch

sys.dont_write_bytecode = True  # no bench/__pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import INTS, TEXT, run, script_args, section  # noqa: E402
from bench_util import load_safetensors as load, save_safetensors as save  # noqa: E402
from torch_ref import GPT, GPTConfig  # noqa: E402

def bits_differ(a, b):
    """How many elements of a and b differ in their bits (any NaN equals any NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return max(a.numel(), b.numel(), 1)
    ia, ib = a.view(INTS[a.element_size()]), b.view(INTS[b.element_size()])
    both_nan = torch.isnan(a) & torch.isnan(b)
    return int(((ia != ib) & ~both_nan).sum())


def main():
    _, (bench, inspect) = script_args(__doc__, ("bench", "inspect"))
    ok = True
    with section("bf16 and f16 checkpoints: tgrad and PyTorch", "safetensors files with BF16 and F16 tensors written "
                 "by one and read by the other, compared bit for bit.") as work:
        # 1. tgrad -> PyTorch
        init = os.path.join(work, "init.safetensors")
        run([bench, "--workload", "gpt-mini", "--steps", "1", "--warmup", "0", "--text", TEXT, "--save-init", init])
        w32 = load(init)
        for dt, to in (("BF16", torch.bfloat16), ("F16", torch.float16)):
            conv = os.path.join(work, f"init_{dt}.safetensors")
            run([inspect, init, "--convert", conv, "--dtype", dt])
            got = load(conv)
            bad = sum(bits_differ(got[k], w32[k].to(to)) for k in w32)
            n = sum(t.numel() for t in w32.values())
            ok &= bad == 0 and got.keys() == w32.keys()
            print(f"tgrad -> PyTorch, {dt}: {len(got)} tensors, {n} values of gpt-mini's init; "
                  f"{bad} differ from PyTorch's own rounding (.to({str(to)[6:]})); file {os.path.getsize(conv)} "
                  f"bytes, F32 {os.path.getsize(init)}")

        # 2. PyTorch -> tgrad
        torch.manual_seed(0)
        model = GPT(GPTConfig(block_size=64, vocab_size=256, n_layer=2, n_head=4, n_embd=128, dropout=0.0,
                              bias=True))
        special = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, 1e-40, -3e-39, 3.3895313892515355e38,
                                1.0 + 2 ** -7, 65504.0, 6e-8])
        for dt, to in (("BF16", torch.bfloat16), ("F16", torch.float16)):
            sd = {k: v.to(to) for k, v in model.state_dict().items() if not k.endswith(".attn.bias")}
            sd["special"] = special.to(to)
            src, back = os.path.join(work, f"torch_{dt}.safetensors"), os.path.join(work, f"back_{dt}.safetensors")
            save(sd, src)
            listing = run([inspect, src, "--convert", back, "--dtype", "F32"])
            got = load(back)
            bad = sum(bits_differ(got[k], sd[k].float()) for k in sd)
            n = sum(t.numel() for t in sd.values())
            shown = sum(1 for line in listing.splitlines() if f" {dt} " in line)
            ok &= bad == 0 and got.keys() == sd.keys() and shown == len(sd)
            print(f"PyTorch -> tgrad, {dt}: {len(sd)} tensors ({shown} listed as {dt} by inspect), {n} values incl. "
                  f"+-inf, NaN, -0, subnormals; {bad} differ from PyTorch's .float() after tgrad's read")
    print()
    print("bit-identical both ways" if ok else "**MISMATCH**")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
