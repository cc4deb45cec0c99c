#!/usr/bin/python3
"""Training with bf16 products against float: gpt-mini's loss curves, tgrad fp32, tgrad bf16 and PyTorch autocast.

    /usr/bin/python3 bench/bf16_loss_curves.py [--build build] [--steps 300] [--threads 1]

Run by `make bench` (appended to BENCHMARKS.md), never by `make test`.
`bench --workload gpt-mini --save-init --losses` trains tgrad's GPT from its
initial weights on the byte windows of tools/bench.c, once with float
products and once with `--precision bf16` (tg_set_precision); PyTorch
(nanoGPT's model, bench/torch_ref.py) starts from the same weights and
trains on the same windows under torch.autocast("cpu", torch.bfloat16).
Prints the three curves every --every steps and the mean loss of the last
20 steps of each; draws them in one PNG when matplotlib is installed (the
table is the record).

Exits 1 when tgrad's bf16 run ends more than 0.03 nats/byte from its fp32
run (the issue's accuracy goal, here on gpt-mini).
"""
import os
import sys
import tempfile

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref  # noqa: E402
from bench_util import ROOT, TEXT, run, script_args  # noqa: E402
from torch_ref import gpt_train  # noqa: E402

def main():
    a, (bench,) = script_args(__doc__, ("bench",), ("--steps", int, 300, "training steps of each run"),
                              ("--every", int, 30, "print the losses every this many steps"),
                              ("--threads", int, 1, "threads of both"),
                              ("--png", str, os.path.join("docs", "bf16_loss_curves.png"), "the figure"))
    curves = {}
    with tempfile.TemporaryDirectory() as work:
        init = os.path.join(work, "init.safetensors")
        for prec in ("fp32", "bf16"):
            losses = os.path.join(work, f"{prec}.txt")
            run([bench, "--workload", "gpt-mini", "--threads", str(a.threads), "--steps", str(a.steps), "--warmup",
                 "0", "--text", TEXT, "--save-init", init, "--losses", losses, "--precision", prec])
            curves[f"tgrad {prec}"] = [float(v) for v in open(losses).read().split()]
        torch_ref.PRECISION = "bf16"
        pt = []
        with open(TEXT, "rb") as f:
            text = f.read()
        _, step = gpt_train("gpt-mini", text, a.steps, init, lambda i, loss: pt.append(loss))
        for _ in range(a.steps):
            step()
        curves["PyTorch autocast bf16"] = pt
    names = list(curves)
    print(f"## bf16 training: gpt-mini loss curves ({a.steps} steps, same init and batches)\n")
    print("`/usr/bin/python3 bench/bf16_loss_curves.py`: tgrad with float products, tgrad with `--precision bf16`, "
          f"PyTorch {torch.__version__} under autocast bf16; AdamW lr 3e-4, weights and optimizer in float.\n")
    print("| step | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for i in list(range(0, a.steps, a.every)) + [a.steps - 1]:
        print(f"| {i + 1} | " + " | ".join(f"{curves[n][i]:.4f}" for n in names) + " |")
    tail = {n: sum(c[-20:]) / len(c[-20:]) for n, c in curves.items()}
    d = abs(tail["tgrad bf16"] - tail["tgrad fp32"])
    print("\nmean of the last 20 steps: " + ", ".join(f"{n} {v:.4f}" for n, v in tail.items()) +
          f"; tgrad bf16 - fp32: {tail['tgrad bf16'] - tail['tgrad fp32']:+.4f} nats/byte "
          f"({'within' if d <= 0.03 else 'NOT within'} 0.03)")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4))
        for n in names:
            ax.plot(range(1, a.steps + 1), curves[n], label=n, lw=1)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (nats/byte)")
        ax.set_title("gpt-mini: float vs bf16 products")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(ROOT, a.png), dpi=100)
        print(f"\n![loss curves]({a.png})")
    except ImportError:
        print("\n(matplotlib is not installed: no figure)")
    sys.exit(0 if d <= 0.03 else 1)


if __name__ == "__main__":
    main()
