#!/usr/bin/python3
"""build/bin/lm's default run, and the same run in PyTorch (nanoGPT's GPT): validation loss per evaluation.

    /usr/bin/python3 bench/lm_torch_ref.py [--build build] [--steps 1200] [--threads 2] [--runs same,own]

Issue 11's last check: lm with its defaults ends within 0.05 nats/byte of what
PyTorch reaches with the same configuration and steps. The script runs
BUILD/bin/lm itself (its defaults; --out a temporary directory, --steps and
--threads as given) and takes everything the PyTorch side needs from what lm
wrote there, so both train on the same thing:

  data    lm's token file (out/tokens.npy: the fortunes corpus, one byte per
          token), split as token_data.c does: n_train = n - int(0.1 n);
  eval    the same fixed validation windows (window j of batch i starts at
          n_train + (i B + j) T), the mean over the same batches of the mean
          cross-entropy per byte, in eval mode without a graph, at the steps
          where lm evaluated (its metrics.jsonl);
  model   nanoGPT's GPT (bench/torch_ref.py) with the sizes in lm.safetensors'
          metadata: tanh GELU, biases, no dropout, tied head;
  train   the run's settings from train_state.safetensors' metadata (batch,
          lr, min-lr, warm-up, weight decay, clip, steps): lr of step it is
          nanoGPT's get_lr (lr_schedule.c), AdamW betas (0.9, 0.95), eps 1e-8,
          decay on tensors of 2 or more dimensions only (configure_optimizers),
          clip_grad_norm_ to `clip` before every step.

Two PyTorch runs (--runs):
  same  starts from tgrad's initial weights (BUILD/bin/bench --workload
        gpt-mini --save-init: the same decoder, seed and draws as lm's default
        model; checked against lm's model after one step at lr 1e-8) and reads
        the same training windows (token_data.c's counter-based SplitMix64,
        replayed below): the same run up to float rounding.
  own   GPT-2 init from torch.manual_seed(1) and windows from torch.randint
        (nanoGPT's get_batch): an independent reference run.

Prints a markdown block (configuration, val_loss per evaluation, the final
differences, PASS/FAIL against --tolerance); exits 1 on FAIL.
PyTorch is for benchmarks only: nothing of `make test` runs this.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.dont_write_bytecode = True                      # no bench/__pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import safetensors_metadata  # noqa: E402
from torch_ref import GPT, GPTConfig, load_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VAL_FRACTION = 0.1          # lm.c: tg_token_data_open(path, 0.1, seed)
BETAS, EPS = (0.9, 0.95), 1e-8   # lm.c sets beta2 0.95 (nanoGPT's train.py); eps is tg_adam_config's


def run(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace")                  # the sample is bytes, not always UTF-8
    if p.returncode != 0:
        sys.exit(f"lm_torch_ref: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}")
    return p.stdout, time.perf_counter() - t0


# ---- token_data.c's window starts: SplitMix64 on a counter (src/tensor/tensor.h) ------

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def _mix(z):
    """tg_rng_mix on a numpy uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def tgrad_window_starts(seed, steps, B, n_train, T):
    """[steps, B] training window starts of tg_token_data_batch for a fresh data generator
    tg_rng_new(seed) (stream 0): step i, window b draws index i B + b."""
    with np.errstate(over="ignore"):
        inner = int(_mix(np.array([(0 + 0x632BE59BD9B4E019) & M64], dtype=np.uint64))[0])
        key = int(_mix(np.array([(seed * GOLDEN + inner) & M64], dtype=np.uint64))[0])
        idx = np.arange(steps * B, dtype=np.uint64)
        h = _mix(np.uint64(key) + (idx + np.uint64(1)) * np.uint64(GOLDEN))
    u = (h >> np.uint64(11)).astype(np.float64) * 2.0**-53       # exact: 53 bits
    rng = n_train - T
    s = (u * float(rng)).astype(np.int64)                        # C's (int64_t) truncation
    s[s >= rng] = rng - 1
    return s.reshape(steps, B)


# ---- the PyTorch run ---------------------------------------------------------------------

def get_lr(it, lr, min_lr, warmup, decay):
    """nanoGPT's get_lr, as tg_lr_at (src/train/lr_schedule.c)."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay:
        return min_lr
    if decay == warmup:
        return lr
    r = (it - warmup) / (decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (lr - min_lr)


def windows(data, starts, T):
    """x, y [B, T] (int64) for the window starts."""
    ix = torch.as_tensor(starts, dtype=torch.long)[:, None] + torch.arange(T)
    return data[ix], data[ix + 1]


def train_torch(cfg, rc, data, n_train, n_eval, eval_steps, init=None, starts=None, seed=1):
    """One run; returns ({step: val_loss}, seconds of the training loop with its evaluations, [train loss])."""
    B, T, steps = rc["batch"], cfg.block_size, rc["steps"]
    torch.manual_seed(seed)
    model = GPT(cfg)
    if init:
        model.load_state_dict(load_file(init))           # strict: every name and shape
    model.train()
    opt = model.configure_optimizers(rc["weight-decay"], rc["lr"], BETAS)
    for g in opt.param_groups:
        g["eps"] = EPS
    params = [p for p in model.parameters()]             # the tied weight once
    warmup = min(rc["warmup"], steps)                    # lm.c: a short run warms up over all of it
    gen = torch.Generator().manual_seed(seed)
    val_starts = n_train + torch.arange(n_eval * B) * T

    def evaluate():
        model.eval()
        with torch.no_grad():
            tot = 0.0
            for i in range(n_eval):
                x, y = windows(data, val_starts[i * B:(i + 1) * B], T)
                tot += model(x, y)[1].item()
        model.train()
        return tot / n_eval

    val, losses = {}, []
    t0 = time.perf_counter()
    for it in range(steps):
        lr = get_lr(it, rc["lr"], rc["min-lr"], warmup, steps)
        for g in opt.param_groups:
            g["lr"] = lr
        if starts is not None:
            x, y = windows(data, starts[it], T)
        else:                                            # nanoGPT's get_batch
            x, y = windows(data, torch.randint(n_train - T, (B,), generator=gen), T)
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        if rc["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(params, rc["clip"])
        opt.step()
        losses.append(loss.item())
        if it + 1 in eval_steps:
            val[it + 1] = evaluate()
            print(f"  torch step {it + 1:5d}/{steps}  loss {loss.item():.4f}  val {val[it + 1]:.4f}  "
                  f"{time.perf_counter() - t0:6.1f} s", file=sys.stderr, flush=True)
    return val, time.perf_counter() - t0, losses


# ---- main ----------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="tgrad's build directory (BUILD/bin/lm, BUILD/bin/bench)")
    ap.add_argument("--steps", type=int, default=1200, help="training steps of both (lm's default: 1200)")
    ap.add_argument("--threads", type=int, default=2, help="threads of both (torch.set_num_threads, lm --threads)")
    ap.add_argument("--runs", default="same,own", help="PyTorch runs: same (tgrad's init and windows), own (torch's)")
    ap.add_argument("--tolerance", type=float, default=0.05, help="largest |final val_loss difference| (nats/byte)")
    a = ap.parse_args()
    runs = [r for r in a.runs.split(",") if r]
    if not runs or any(r not in ("same", "own") for r in runs):
        ap.error("--runs takes same, own or same,own")
    if a.steps < 1:
        ap.error("--steps must be at least 1")
    torch.set_num_threads(a.threads)
    build = a.build if os.path.isabs(a.build) else os.path.join(ROOT, a.build)
    lm, bench = (os.path.join(build, "bin", p) for p in ("lm", "bench"))

    with tempfile.TemporaryDirectory(prefix="lm_torch_ref.") as work:
        # 1. tgrad: lm with its defaults
        out = os.path.join(work, "lm")
        print(f"lm_torch_ref: {lm} --out {out} --steps {a.steps} --threads {a.threads} ...", file=sys.stderr,
              flush=True)
        log, tg_wall = run([lm, "--out", out, "--steps", str(a.steps), "--threads", str(a.threads)])
        m = re.search(r"^val_loss=([0-9.]+) nats/byte$", log.strip().splitlines()[-1])
        tg_secs = float(re.search(r"^trained steps \d+\.\.\d+ in ([0-9.]+) s$", log, re.M).group(1))
        per_eval = int(re.search(r"; (\d+) validation windows of (\d+) per evaluation", log).group(1))
        if not m:
            sys.exit(f"lm_torch_ref: lm's last line is not val_loss=<x> nats/byte:\n{log}")
        tg_final = float(m.group(1))
        tg_val, tg_loss = {}, {}
        with open(os.path.join(out, "metrics.jsonl")) as f:
            for line in f:
                o = json.loads(line)
                tg_loss[int(o["step"])] = float(o["loss"])
                if o.get("val_loss") is not None:
                    tg_val[int(o["step"])] = float(o["val_loss"])
        meta = safetensors_metadata(os.path.join(out, "train_state.safetensors"))
        cfg = GPTConfig(block_size=int(meta["block_size"]), vocab_size=int(meta["vocab_size"]),
                        n_layer=int(meta["n_layer"]), n_head=int(meta["n_head"]), n_embd=int(meta["n_embd"]),
                        dropout=float(meta["dropout"]), bias=meta["bias"] == "true", gelu=meta["gelu"])
        rc = {k: float(meta[k]) for k in ("lr", "min-lr", "weight-decay", "clip")}
        rc.update({k: int(meta[k]) for k in ("seed", "steps", "batch", "warmup", "accum")})
        if rc["accum"] != 1 or meta.get("pe", "learned") != "learned" or cfg.dropout != 0:
            sys.exit("lm_torch_ref: this script replays lm's defaults: accum 1, learned positions, no dropout")
        B, T = rc["batch"], cfg.block_size
        tokens = np.load(os.path.join(out, "tokens.npy"))
        n = len(tokens)
        n_train = n - int(n * VAL_FRACTION)
        data = torch.from_numpy(tokens.astype(np.int64))
        n_eval = per_eval // B
        eval_steps = sorted(tg_val)

        # 2. tgrad's initial weights, checked against lm's model after one step at lr 1e-8
        init = init_diff = None
        if "same" in runs:
            init = os.path.join(work, "init.safetensors")
            run([bench, "--workload", "gpt-mini", "--threads", "1", "--steps", "10", "--warmup", "0",
                 "--text", os.path.join(out, "fortunes.txt"), "--save-init", init])
            one = os.path.join(work, "one")
            run([lm, "--data", os.path.join(out, "tokens.npy"), "--out", one, "--steps", "1", "--lr", "1e-8",
                 "--tokens", "0", "--threads", str(a.threads)])
            w0, w1 = load_file(init), load_file(os.path.join(one, "lm.safetensors"))
            init_diff = max(float((w0[k] - w1[k]).abs().max()) for k in w1)
            if init_diff > 1e-6:
                sys.exit(f"lm_torch_ref: bench's initial weights are not lm's (max |difference| {init_diff:.2e})")

        # 3. PyTorch
        pt = {}
        for r in runs:
            print(f"lm_torch_ref: PyTorch run '{r}', {rc['steps']} steps ...", file=sys.stderr, flush=True)
            starts = tgrad_window_starts(rc["seed"], rc["steps"], B, n_train, T) if r == "same" else None
            pt[r] = train_torch(cfg, rc, data, n_train, n_eval, set(eval_steps), init if r == "same" else None,
                                starts)

    # 4. the markdown block
    names = {"same": "PyTorch, tgrad's init and windows", "own": "PyTorch, own init and windows"}
    last = eval_steps[-1]
    print(f"## lm's default run against PyTorch (nanoGPT's GPT, torch {torch.__version__})\n")
    print(f"`/usr/bin/python3 bench/lm_torch_ref.py --steps {a.steps}`: `lm --out TMP --steps {a.steps} --threads "
          f"{a.threads}` (its defaults otherwise), then the same configuration in PyTorch, "
          f"torch.set_num_threads({a.threads}).\n")
    print(f"- data: Debian's fortunes as lm builds them, {n} bytes, {n_train} for training and {n - n_train} for "
          f"validation; validation loss: the mean over {n_eval} fixed batches of {B} back-to-back windows of {T} "
          f"bytes at the start of the validation split (nats/byte)")
    print(f"- model: GPT, V {cfg.vocab_size}, T {T}, {cfg.n_layer} layers, {cfg.n_head} heads, d {cfg.n_embd}, "
          f"biases, {cfg.gelu} GELU, no dropout, tied head, GPT-2 init")
    print(f"- training: {rc['steps']} steps of batch {B}, AdamW lr {rc['lr']:g} (linear warm-up "
          f"{min(rc['warmup'], rc['steps'])} steps, cosine to {rc['min-lr']:g}), betas {BETAS}, eps {EPS:g}, weight "
          f"decay {rc['weight-decay']:g} on matrices only, gradient norm clipped to {rc['clip']:g}")
    if "same" in pt:
        k = min(10, rc["steps"])
        d10 = max(abs(pt["same"][2][i] - tg_loss[i + 1]) for i in range(k))
        print(f"- {names['same']}: tgrad's initial weights (max |difference| to lm's model after one step at lr "
              f"1e-8: {init_diff:.1e}) and tgrad's training windows (token_data.c's generator, seed "
              f"{rc['seed']}); training loss of the first {k} steps: max |tgrad - PyTorch| {d10:.1e}")
    if "own" in pt:
        print(f"- {names['own']}: torch.manual_seed(1), nanoGPT's init and get_batch (torch.randint)")
    print()
    print("| step | tgrad | " + " | ".join(names[r] for r in pt) + " |")
    print("|---:|---:|" + "---:|" * len(pt))
    for s in eval_steps:
        print(f"| {s} | {tg_val[s]:.4f} | " + " | ".join(f"{pt[r][0][s]:.4f}" for r in pt) + " |")
    print()
    print(f"time of the {rc['steps']} steps with their evaluations: tgrad {tg_secs:.1f} s, "
          + ", ".join(f"{names[r]} {pt[r][1]:.1f} s" for r in pt) + f" ({a.threads} threads; wall time, so it depends on the machine's load: "
          "bench/torch_ref.py's gpt-mini is the speed comparison)\n")
    ok = abs(tg_val[last] - tg_final) < 5e-5
    for r in pt:
        d = tg_final - pt[r][0][last]
        ok &= abs(d) < a.tolerance
        print(f"- final val_loss: tgrad {tg_final:.4f}, {names[r]} {pt[r][0][last]:.4f}: tgrad - PyTorch = "
              f"{d:+.4f} nats/byte")
    print(f"\n{'PASS' if ok else 'FAIL'}: tgrad's final validation loss is within {a.tolerance:g} nats/byte of "
          f"PyTorch's")
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
