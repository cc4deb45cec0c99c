#!/usr/bin/python3
"""tgrad's GPT and nanoGPT's, side by side: checkpoints both ways, and the loss curves.

    /usr/bin/python3 bench/gpt_interop.py [--build build] [--steps 100] [--threads 1]

Run by `make bench` (appended to BENCHMARKS.md). Three checks, float32:

1. tgrad -> PyTorch. build/bin/lm trains a small GPT on the committed fortunes
   excerpt and saves it (lm.safetensors, nanoGPT's state_dict names, the sizes
   in the metadata); nanoGPT's GPT (bench/torch_ref.py) loads it strictly,
       model.load_state_dict(load_file(path))
   and its logits for a prompt are compared with the ones `lm --logits` writes.
2. PyTorch -> tgrad. The PyTorch model trained in 3 is saved the way
   safetensors.torch.save_model saves a tied model (lm_head.weight only), with
   the sizes as metadata; `lm --load` reads it and its logits are compared.
3. Loss curves. `bench --workload gpt-mini --save-init` writes tgrad's initial
   weights and trains --steps steps; PyTorch starts from those weights and
   trains on the same byte windows (the formula of tools/bench.c) with the same
   AdamW. Both curves are printed every 10 steps with their largest difference.

Exits 1 when the logits differ by more than 1e-4 or the curves by more than 1e-2.
"""
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True                      # no bench/__pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import TEXT, run, safetensors_metadata, script_args, section  # noqa: E402
from torch_ref import GPT, GPTConfig, gpt_train, load_file, save_file  # noqa: E402

PROMPT = "A fortune is a short saying; "     # < 64 bytes: fits both models' block


def config_of(path):
    m = safetensors_metadata(path)
    return GPTConfig(block_size=int(m["block_size"]), vocab_size=int(m["vocab_size"]), n_layer=int(m["n_layer"]),
                     n_head=int(m["n_head"]), n_embd=int(m["n_embd"]), bias=m["bias"] == "true", gelu=m["gelu"])


def torch_logits(model, prompt):
    model.eval()
    with torch.no_grad():
        idx = torch.tensor([list(prompt.encode())], dtype=torch.long)
        return model(idx)[0].numpy()


def main():
    a, (lm, bench) = script_args(__doc__, ("lm", "bench"),
                                 ("--steps", int, 100, "training steps of the loss-curve comparison"),
                                 ("--threads", int, 1, "threads of both"))
    ok = True
    with section("GPT: tgrad and PyTorch, nanoGPT's model.py", "checkpoints both ways and the loss curves from the same "
                 "weights on the same batches (float32).") as work:
        # 1. tgrad -> PyTorch
        out = os.path.join(work, "lm")
        run([lm, "--data", TEXT, "--out", out, "--steps", "60", "--batch", "8", "--block", "64", "--layers", "2",
             "--heads", "4", "--dim", "64", "--eval-every", "60", "--tokens", "0", "--threads", str(a.threads)])
        ckpt, npy = os.path.join(out, "lm.safetensors"), os.path.join(work, "tg_logits.npy")
        run([lm, "--load", ckpt, "--logits", npy, "--prompt", PROMPT])
        model = GPT(config_of(ckpt))
        model.load_state_dict(load_file(ckpt))           # strict
        d = float(np.abs(torch_logits(model, PROMPT) - np.load(npy)).max())
        ok &= d <= 1e-4
        print(f"tgrad -> PyTorch: lm.safetensors (60 steps of lm) loads with load_state_dict(load_file(path)), "
              f"strict; logits of a {len(PROMPT)}-byte prompt: max |difference| {d:.2e}")

        # 3. loss curves (its PyTorch model is the one of 2)
        init, tg_losses = os.path.join(work, "init.safetensors"), os.path.join(work, "tg_losses.txt")
        run([bench, "--workload", "gpt-mini", "--threads", str(a.threads), "--steps", str(a.steps), "--warmup", "0",
             "--text", TEXT, "--save-init", init, "--losses", tg_losses])
        tg = [float(v) for v in open(tg_losses).read().split()]
        with open(TEXT, "rb") as f:
            text = f.read()
        pt = []
        model, step = gpt_train("gpt-mini", text, a.steps, init, lambda i, v: pt.append(v))
        for _ in range(a.steps):
            step()

        # 2. PyTorch -> tgrad: the trained model, saved as save_model keeps a tied pair (lm_head.weight only)
        sd = {k: v for k, v in model.state_dict().items() if k != "transformer.wte.weight"}
        c = model.config
        meta = {"vocab_size": str(c.vocab_size), "block_size": str(c.block_size), "n_layer": str(c.n_layer),
                "n_head": str(c.n_head), "n_embd": str(c.n_embd), "bias": "true" if c.bias else "false",
                "gelu": c.gelu}
        pt_ckpt, npy = os.path.join(work, "torch.safetensors"), os.path.join(work, "tg_logits2.npy")
        save_file(sd, pt_ckpt, metadata=meta)
        run([lm, "--load", pt_ckpt, "--logits", npy, "--prompt", PROMPT])
        d = float(np.abs(torch_logits(model, PROMPT) - np.load(npy)).max())
        ok &= d <= 1e-4
        print(f"PyTorch -> tgrad: the PyTorch model after {a.steps} steps, saved with lm_head.weight only, "
              f"loads with lm --load; logits: max |difference| {d:.2e}")

        print(f"\nloss curves, gpt-mini (V 256, T 64, 2 layers, 4 heads, d 128, batch 32), AdamW 3e-4, "
              f"same init and batches, {a.threads} thread(s):")
        print(f"{'step':>5} {'tgrad':>10} {'PyTorch':>10} {'|diff|':>10}")
        for i in list(range(0, a.steps, 10)) + ([a.steps - 1] if (a.steps - 1) % 10 else []):
            print(f"{i + 1:5d} {tg[i]:10.6f} {pt[i]:10.6f} {abs(tg[i] - pt[i]):10.2e}")
        diff = max(abs(x - y) for x, y in zip(tg, pt))
        ok &= len(tg) == len(pt) == a.steps and diff <= 1e-2
        print(f"max |difference| over {a.steps} steps: {diff:.2e} (loss {tg[0]:.4f} -> {tg[-1]:.4f})")
    print(f"\n{'PASS' if ok else 'FAIL'}: logits agree to 1e-4 both ways and the loss curves to 1e-2")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
