#!/usr/bin/python3
"""The PyTorch side of tools/bench: the same workloads, in PyTorch.

    /usr/bin/python3 bench/torch_ref.py --workload toy --threads 1 [--variant d2l|nn|both]

Workloads (the same as tools/bench.c):
  toy, mid   d2l's post-norm Transformer encoder + Linear(d, V), cross-entropy at
             every position, reversing random token sequences, Adam lr 1e-3,
             dropout 0.1. A step is zero_grad + forward + loss + backward + Adam.
  attn-T     one multi-head self-attention layer (d 64, 4 heads, batch 1,
             dropout 0.1) on a [1, T, 64] input: forward and backward of sum(out).
  gemm-n     C = A B, n x n float32 (torch.mm with out=).

Two attention variants: "d2l" is d2l's MultiHeadAttention (nn.Linear without bias,
transpose_qkv, DotProductAttention); "nn" is torch.nn.MultiheadAttention
(batch_first=True, bias=False). With --variant both (the default) each is timed
and the faster one is reported last. tools/bench runs each variant in its own
process (so peak RSS is per variant) and sets the thread environment
(OMP_NUM_THREADS, ..., OPENBLAS_CORETYPE unset) before Python starts.

Prints key=value lines; the last line is ms_per_step=<median>.
"""
import argparse
import math
import os
import resource
import statistics
import sys
import time

import torch
from torch import nn


# ---- d2l modules (chapter "Self-Attention and Positional Encoding") ---------

class PositionalEncoding(nn.Module):
    """P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(i / 10000^(2j/d))."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        P = torch.zeros((1, max_len, num_hiddens))
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
            10000, torch.arange(0, num_hiddens, 2, dtype=torch.float32) / num_hiddens)
        P[:, :, 0::2] = torch.sin(X)
        P[:, :, 1::2] = torch.cos(X)
        self.register_buffer("P", P, persistent=False)

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class DotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = torch.softmax(scores, dim=-1)   # no valid_lens here
        return torch.bmm(self.dropout(self.attention_weights), values)


def transpose_qkv(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class D2LMultiHeadAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, dropout, bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values):
        q = transpose_qkv(self.W_q(queries), self.num_heads)
        k = transpose_qkv(self.W_k(keys), self.num_heads)
        v = transpose_qkv(self.W_v(values), self.num_heads)
        out = self.attention(q, k, v)
        return self.W_o(transpose_output(out, self.num_heads))


class TorchMultiHeadAttention(nn.Module):
    """torch.nn.MultiheadAttention behind the d2l calling convention."""

    def __init__(self, num_hiddens, num_heads, dropout):
        super().__init__()
        self.mha = nn.MultiheadAttention(num_hiddens, num_heads, dropout=dropout, bias=False,
                                         batch_first=True)

    def forward(self, queries, keys, values):
        return self.mha(queries, keys, values, need_weights=False)[0]


def make_attention(variant, num_hiddens, num_heads, dropout):
    if variant == "d2l":
        return D2LMultiHeadAttention(num_hiddens, num_heads, dropout)
    return TorchMultiHeadAttention(num_hiddens, num_heads, dropout)


class PositionWiseFFN(nn.Module):
    def __init__(self, num_hiddens, ffn_hiddens):
        super().__init__()
        self.dense1 = nn.Linear(num_hiddens, ffn_hiddens)
        self.relu = nn.ReLU()
        self.dense2 = nn.Linear(ffn_hiddens, num_hiddens)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    def __init__(self, num_hiddens, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(num_hiddens)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class EncoderBlock(nn.Module):
    def __init__(self, variant, num_hiddens, ffn_hiddens, num_heads, dropout):
        super().__init__()
        self.attention = make_attention(variant, num_hiddens, num_heads, dropout)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(num_hiddens, ffn_hiddens)
        self.addnorm2 = AddNorm(num_hiddens, dropout)

    def forward(self, X):
        Y = self.addnorm1(X, self.attention(X, X, X))
        return self.addnorm2(Y, self.ffn(Y))


class Model(nn.Module):
    """Embedding * sqrt(d) -> + P -> dropout -> L blocks -> Linear(d, V)."""

    def __init__(self, variant, V, d, heads, ffn, L, dropout):
        super().__init__()
        self.d = d
        self.embedding = nn.Embedding(V, d)
        self.pos_encoding = PositionalEncoding(d, dropout)
        self.blocks = nn.ModuleList(EncoderBlock(variant, d, ffn, heads, dropout) for _ in range(L))
        self.head = nn.Linear(d, V)

    def forward(self, tokens):
        X = self.pos_encoding(self.embedding(tokens) * math.sqrt(self.d))
        for block in self.blocks:
            X = block(X)
        return self.head(X)


# ---- workloads -----------------------------------------------------------------

MODELS = {
    "toy": dict(V=16, T=16, B=64, d=64, heads=4, ffn=128, L=2),
    "mid": dict(V=64, T=128, B=32, d=256, heads=8, ffn=1024, L=4),
}


def default_steps(kind, size):
    """(timed steps, warm-up steps) when not given: as default_steps in tools/bench.c."""
    s, w = 10, 2
    if kind == "toy":
        s, w = 50, 10
    if kind == "attn" and size <= 1024:
        s, w = 20, 3
    if kind == "attn" and size >= 4096:
        w = 1
    if kind == "gemm":
        s, w = (50, 5) if size <= 512 else (10, 1)
    return s, w


def rss_now_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def blas_library():
    """The BLAS shared library this process has loaded (PyTorch's matmuls go there)."""
    with open("/proc/self/maps") as f:
        paths = {os.path.realpath(line.split()[-1]) for line in f if "blas" in line.split()[-1]}
    return ",".join(sorted(p for p in paths if "lapack" not in os.path.basename(p))) or "none"


def time_steps(step, steps, warmup):
    """Runs warmup + steps calls of step(); returns the timed ones in ms."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def model_steps(name, variant, steps, warmup):
    c = MODELS[name]
    torch.manual_seed(1)
    model = Model(variant, c["V"], c["d"], c["heads"], c["ffn"], c["L"], 0.1)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        x = torch.randint(0, c["V"], (c["B"], c["T"]))
        y = torch.flip(x, dims=[1])                  # target: the reversed sequence
        opt.zero_grad()
        logits = model(x)
        loss = loss_fn(logits.reshape(-1, c["V"]), y.reshape(-1))
        loss.backward()
        opt.step()

    return time_steps(step, steps, warmup)


def attention_steps(T, variant, steps, warmup):
    torch.manual_seed(1)
    attn = make_attention(variant, 64, 4, 0.1)
    attn.train()
    X = torch.randn(1, T, 64)

    def step():
        attn.zero_grad()
        attn(X, X, X).sum().backward()

    return time_steps(step, steps, warmup)


def gemm_steps(n, steps, warmup):
    torch.manual_seed(1)
    A, B, C = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
    return time_steps(lambda: torch.mm(A, B, out=C), steps, warmup)


def run(workload, variant, steps, warmup):
    kind = workload.split("-")[0]
    s, w = default_steps(kind, int(workload[5:]) if kind in ("attn", "gemm") else 0)
    steps, warmup = steps or s, warmup if warmup >= 0 else w
    if workload in MODELS:
        return model_steps(workload, variant, steps, warmup)
    if kind == "attn":
        return attention_steps(int(workload[5:]), variant, steps, warmup)
    if kind == "gemm":
        return gemm_steps(int(workload[5:]), steps, warmup)
    raise SystemExit(f"torch_ref.py: unknown workload '{workload}'")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", required=True, help="toy, mid, attn-T or gemm-n")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variant", choices=["d2l", "nn", "both"], default="both",
                    help="attention implementation (ignored for gemm)")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (0: the workload's default)")
    ap.add_argument("--warmup", type=int, default=-1, help="warm-up steps (-1: the workload's default)")
    a = ap.parse_args()
    w = a.workload
    if not (w in MODELS or (w.startswith(("attn-", "gemm-")) and w[5:].isdigit() and int(w[5:]) > 0)):
        ap.error(f"unknown workload '{w}'")
    torch.set_num_threads(a.threads)
    variants = ["-"] if w.startswith("gemm-") else (["d2l", "nn"] if a.variant == "both" else [a.variant])
    rss0 = rss_now_mb()
    best = None
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    for v in variants:
        times = run(w, v, a.steps, a.warmup)
        med = statistics.median(times)
        print(f"variant={v} median_ms={med:.4f} min_ms={min(times):.4f} max_ms={max(times):.4f} "
              f"steps={len(times)}")
        if best is None or med < best[1]:
            best = (v, med, min(times), max(times))
    print(f"blas={blas_library()}")
    print(f"best_variant={best[0]} min_ms={best[2]:.4f} max_ms={best[3]:.4f} "
          f"rss_peak_mb={rss_peak_mb():.1f} rss_added_mb={rss_peak_mb() - rss0:.1f}")
    print(f"ms_per_step={best[1]:.4f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
