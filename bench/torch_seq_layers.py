#!/usr/bin/python3
"""Checks tgrad's Conv1d, RNN and GRU against PyTorch.

    build/bin/seq_layers_dump --out seq_layers.safetensors
    /usr/bin/python3 bench/torch_seq_layers.py seq_layers.safetensors

The file (written by tools/seq_layers_dump.c with tg_checkpoint_save) holds
the input x [2, 7, 5], the parameters of each module under PyTorch's names,
each module's output y.<name> and the gradients of sum(y^2)/2 (grad_x.<name>,
grad.<param>). The weights are loaded into torch.nn.Conv1d(padding='same'),
torch.nn.RNN(batch_first=True) and torch.nn.GRU(batch_first=True) with
load_state_dict(strict=True), and the outputs and gradients are compared.
Prints the max absolute difference per module and exits 1 above the
tolerance (float32 files: 1e-5 relative to the largest value)."""
import sys

import numpy as np
import torch

from torch_ref import load_file


def load_safetensors(path):
    """name -> float64 numpy array (torch_ref.load_file: the safetensors package or the format by hand)."""
    return {name: t.double().numpy() for name, t in load_file(path).items()}


def main():
    t = load_safetensors(sys.argv[1] if len(sys.argv) > 1 else "seq_layers.safetensors")
    torch.set_default_dtype(torch.float64)
    x_np = t["x"]
    in_size = x_np.shape[2]
    mods = {
        "conv": lambda: torch.nn.Conv1d(in_size, t["conv.weight"].shape[0], 3, padding="same"),
        "conv_dil": lambda: torch.nn.Conv1d(in_size, t["conv_dil.weight"].shape[0], 4, dilation=2, padding="same"),
        "rnn": lambda: torch.nn.RNN(in_size, t["rnn.weight_hh_l0"].shape[1], num_layers=2, batch_first=True),
        "gru": lambda: torch.nn.GRU(in_size, t["gru.weight_hh_l0"].shape[1], num_layers=2, batch_first=True),
    }
    worst = 0.0
    for name, make in mods.items():
        m = make()
        sd = {k[len(name) + 1:]: torch.tensor(v) for k, v in t.items() if k.startswith(name + ".")}
        m.load_state_dict(sd, strict=True)
        x = torch.tensor(x_np, requires_grad=True)
        if name.startswith("conv"):
            y = m(x.transpose(1, 2)).transpose(1, 2)
        else:
            y = m(x)[0]
        (y * y).sum().mul(0.5).backward()
        scale = max(1.0, float(np.abs(t["y." + name]).max()))
        dy = float(np.abs(y.detach().numpy() - t["y." + name]).max())
        dx = float(np.abs(x.grad.numpy() - t["grad_x." + name]).max())
        dp = max(float(np.abs(p.grad.numpy() - t["grad." + name + "." + k]).max()) for k, p in m.named_parameters())
        print(f"{name}: max |y - y_torch| {dy:.3e}  max |dx| diff {dx:.3e}  max |dparam| diff {dp:.3e}  "
              f"({len(sd)} tensors loaded strictly: {', '.join(sd)})")
        worst = max(worst, max(dy, dx, dp) / scale)
    print(f"worst relative difference {worst:.3e}")
    return 0 if worst < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
