#!/usr/bin/python3
"""The PyTorch side of tools/bench: the same workloads, in PyTorch.

    /usr/bin/python3 bench/torch_ref.py --workload toy --threads 1 [--variant d2l|nn|both]

Workloads (the same as tools/bench.c):
  toy, mid   d2l's post-norm Transformer encoder + Linear(d, V), cross-entropy at
             every position, reversing random token sequences, Adam lr 1e-3,
             dropout 0.1. A step is zero_grad + forward + loss + backward + Adam.
  gpt-mini   nanoGPT's GPT (model.py, written out below): V 256, T 64, 2 layers,
             4 heads, d 128, batch 32; gpt-small: T 128, 4 layers, 8 heads, d 256,
             batch 16. Byte windows of --text at the starts tools/bench.c uses
             (gpt_batch), AdamW lr 3e-4, betas (0.9, 0.95), weight decay 0.1 on
             matrices, no dropout. --init FILE starts from tgrad's weights.
  gpt2       the same GPT at GPT-2 small's size: V 50257, T 1024, 12 layers,
             12 heads, d 768, B 1 (--batch, --seq: B and T, as bench's).
             nanoGPT's eager attention keeps B h T^2 floats per layer.
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
import statistics
import sys
import time
from dataclasses import dataclass

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


# ---- nanoGPT's GPT (karpathy/nanoGPT model.py), for PyTorch < 2.0 ----------------
# The same modules, names, initialisation (N(0, 0.02), residual projections
# N(0, 0.02 / sqrt(2 L)), tied head) and forward as model.py. Two differences,
# both invisible in a state_dict: torch 1.13 has no scaled_dot_product_attention,
# so attention is model.py's manual branch, with its causal mask registered
# non-persistent (model.py's persistent "attn.bias" buffers would make a strict
# load_state_dict of a checkpoint without them fail); and the GELU is a
# parameter: "tanh" is GPT-2's (tgrad's default), "erf" is model.py's nn.GELU().


@dataclass
class GPTConfig:
    block_size: int = 64
    vocab_size: int = 256
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True
    gelu: str = "tanh"


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return nn.functional.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size), persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = nn.functional.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate="tanh" if config.gelu == "tanh" else "none")
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight   # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        """nanoGPT's: decay on every parameter of 2 or more dimensions, none on the rest."""
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)


# ---- safetensors: the package if installed, else the format read by hand ------
try:
    from safetensors.torch import load_file, save_file
except ImportError:
    sys.dont_write_bytecode = True  # no bench/__pycache__ in the tree
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_util import load_safetensors as load_file, save_safetensors as save_file  # noqa: E402,F401


GPTS = {
    "gpt-mini": dict(V=256, T=64, B=32, L=2, heads=4, d=128),
    "gpt-small": dict(V=256, T=128, B=16, L=4, heads=8, d=256),
    # GPT-2 small's shape; B (and T) from --batch and --seq, as tools/bench.c
    # (which chooses B for memory when not given: run it first and pass its B)
    "gpt2": dict(V=50257, T=1024, B=1, L=12, heads=12, d=768),
}


def gpt_batch(text, window, B, T):
    """B windows from window number `window` on: x, y [B, T] (tools/bench.c: gpt_prepare)."""
    n = len(text)
    xs, ys = [], []
    for b in range(B):
        s = ((window + b) * 2654435761) % (n - T - 1)
        xs.append(text[s:s + T])
        ys.append(text[s + 1:s + T + 1])
    x = torch.tensor([list(r) for r in xs], dtype=torch.long)
    y = torch.tensor([list(r) for r in ys], dtype=torch.long)
    return x, y


def gpt_model(name, init=None):
    c = GPTS[name]
    torch.manual_seed(1)
    model = GPT(GPTConfig(block_size=c["T"], vocab_size=c["V"], n_layer=c["L"], n_head=c["heads"],
                          n_embd=c["d"]))
    if init:
        model.load_state_dict(load_file(init))    # strict: every name and shape
    model.train()
    return model


def gpt_train(name, text, steps, init=None, on_loss=None):
    """steps training steps of gpt workload name; calls on_loss(i, loss) after each."""
    c = GPTS[name]
    model = gpt_model(name, init)
    opt = model.configure_optimizers(0.1, 3e-4, (0.9, 0.95))
    batches = [gpt_batch(text, i * c["B"], c["B"], c["T"]) for i in range(steps)]
    state = {"i": 0}

    def step():
        x, y = batches[state["i"]]
        opt.zero_grad(set_to_none=True)
        # --precision bf16: autocast as its documentation shows for training,
        # around the forward and the loss; backward outside it follows the
        # forward's dtypes; the weights and AdamW stay float32.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=PRECISION == "bf16"):
            _, loss = model(x, y)
        loss.backward()
        opt.step()
        if on_loss:
            on_loss(state["i"], loss.item())
        state["i"] += 1

    return model, step


def gpt_steps(name, steps, warmup, text_path, init):
    with open(text_path, "rb") as f:
        text = f.read()
    _, step = gpt_train(name, text, warmup + steps, init)
    return time_steps(step, steps, warmup)


# ---- workloads -----------------------------------------------------------------

PRECISION = "fp32"  # --precision

MODELS = {
    "toy": dict(V=16, T=16, B=64, d=64, heads=4, ffn=128, L=2),
    "mid": dict(V=64, T=128, B=32, d=256, heads=8, ffn=1024, L=4),
}


def default_steps(kind, size):
    """(timed steps, warm-up steps) when not given: as default_steps in tools/bench.c."""
    s, w = 10, 2
    if kind == "toy":
        s, w = 50, 10
    if kind == "gpt-mini":
        s, w = 30, 5
    if kind == "gpt-small":
        s, w = 20, 3
    if kind == "gpt2":
        s, w = 2, 1
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
    """VmHWM, this program's peak resident set: getrusage's ru_maxrss keeps the parent's across exec."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


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
    if PRECISION == "bf16":  # what autocast would run: a bf16 mm (oneDNN), bf16 result
        A, B, C = A.bfloat16(), B.bfloat16(), C.bfloat16()
    return time_steps(lambda: torch.mm(A, B, out=C), steps, warmup)


def run(workload, variant, steps, warmup, text=None, init=None):
    kind = workload if workload in GPTS else workload.split("-")[0]
    s, w = default_steps(kind, int(workload[5:]) if kind in ("attn", "gemm") else 0)
    steps, warmup = steps or s, warmup if warmup >= 0 else w
    if workload in GPTS:
        return gpt_steps(workload, steps, warmup, text, init)
    if workload in MODELS:
        return model_steps(workload, variant, steps, warmup)
    if kind == "attn":
        return attention_steps(int(workload[5:]), variant, steps, warmup)
    if kind == "gemm":
        return gemm_steps(int(workload[5:]), steps, warmup)
    raise SystemExit(f"torch_ref.py: unknown workload '{workload}'")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", required=True, help="toy, mid, gpt-mini, gpt-small, gpt2, attn-T or gemm-n")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variant", choices=["d2l", "nn", "both", "nanogpt"], default="both",
                    help="attention implementation (ignored for gemm; the gpt workloads have one, nanogpt)")
    ap.add_argument("--text", default="tests/data/fortunes_excerpt.txt", help="gpt workloads: the training text")
    ap.add_argument("--init", default=None, help="gpt workloads: initial weights (a tgrad safetensors file)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: gpt workloads under torch.autocast(cpu, bfloat16), gemm on bf16 tensors")
    ap.add_argument("--batch", type=int, default=0, help="gpt2: the batch B (0: 1)")
    ap.add_argument("--seq", type=int, default=0, help="gpt2: the sequence length T (0: 1024)")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (0: the workload's default)")
    ap.add_argument("--warmup", type=int, default=-1, help="warm-up steps (-1: the workload's default)")
    a = ap.parse_args()
    global PRECISION
    PRECISION = a.precision
    w = a.workload
    if PRECISION == "bf16" and not (w in GPTS or w.startswith("gemm-")):
        ap.error("--precision bf16 is measured for the gpt and gemm workloads only")
    if not (w in MODELS or w in GPTS or (w.startswith(("attn-", "gemm-")) and w[5:].isdigit() and int(w[5:]) > 0)):
        ap.error(f"unknown workload '{w}'")
    if (a.batch or a.seq) and w != "gpt2":
        ap.error("--batch and --seq are for --workload gpt2")
    if a.batch:
        GPTS["gpt2"]["B"] = a.batch
    if a.seq:
        GPTS["gpt2"]["T"] = a.seq
    torch.set_num_threads(a.threads)
    if w in GPTS:
        variants = ["nanogpt"]
    else:
        variants = ["-"] if w.startswith("gemm-") else (["d2l", "nn"] if a.variant == "both" else [a.variant])
    rss0 = rss_now_mb()
    best = None
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} precision={PRECISION} "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    for v in variants:
        times = run(w, v, a.steps, a.warmup, a.text, a.init)
        med = statistics.median(times)
        print(f"variant={v} median_ms={med:.4f} min_ms={min(times):.4f} max_ms={max(times):.4f} "
              f"steps={len(times)}")
        if w in GPTS:
            print(f"tokens_per_step={GPTS[w]['B'] * GPTS[w]['T']} "
                  f"tokens_per_s={GPTS[w]['B'] * GPTS[w]['T'] / (med * 1e-3):.1f}")
        if best is None or med < best[1]:
            best = (v, med, min(times), max(times))
    print(f"blas={blas_library()}")
    print(f"best_variant={best[0]} min_ms={best[2]:.4f} max_ms={best[3]:.4f} "
          f"rss_peak_mb={rss_peak_mb():.1f} rss_added_mb={rss_peak_mb() - rss0:.1f}")
    print(f"ms_per_step={best[1]:.4f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
