#!/usr/bin/python3
"""The full comparison of tools/bench: every workload at 1 and 2 threads,
tgrad against PyTorch, as one table; with --markdown, BENCHMARKS.md's first
sections.

    build/bin/bench [--only toy,gemm-128] [--rounds 3] [--markdown BENCHMARKS.md] [--no-torch]

bench runs this script (with /usr/bin/python3) when it is given no
--workload, with the flags it has checked and its own path (--bench).
Standard library only, so that it runs where PyTorch is missing (and says
so: tgrad's numbers alone).

Each measurement is a child process, so every peak RSS figure is that of
one workload alone: tgrad's is `bench --workload W --threads N`, PyTorch's
`PYTHON bench/torch_ref.py --workload W --threads N --variant V`, at its
best (its own thread settings, and OpenBLAS's kernels for this CPU:
openblas_coretype below). The machine is shared and noisy, so tgrad
and PyTorch are measured alternately in --rounds rounds: a noisy minute
lands on one round of one side, not on a whole row (bench --rounds shares a
slow workload's default steps among them, and PyTorch runs the steps tgrad
ran). A row is the median of the rounds' medians, the smallest minimum, the
largest maximum and peak RSS; failed if any round failed.

The "of peak" columns are against the best peak measured in the run
(`bench --peaks` at the start and the end, and each gemm row's own probe):
the FMA peak, or for a bf16 row the bf16 dot-product peak.
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import time

WORKLOADS = ["toy", "mid", "gpt-mini", "gpt-small", "attn-256", "attn-1024", "attn-2048", "attn-4096",
             "gemm-128", "gemm-256", "gemm-512", "gemm-1024", "gemm-2048"]
# Measured again with bf16 products (tg_set_precision; PyTorch with autocast).
BF16_WORKLOADS = ["gpt-mini", "gpt-small", "gemm-512", "gemm-1024", "gemm-2048"]
VARIANTS = ["d2l", "nn"]  # PyTorch's two attentions; the GPT has one form, nanoGPT's
ISA = {  # tg_isa_name's level, and what runs at it
    "amx": "amx: AVX-512 (GEMM, elementwise, norm, exp), AMX tiles or AVX-512 BF16 (the bf16 GEMM, by measured "
           "rate), AVX2 (attention rows, packing)",
    "avx512_bf16": "avx512_bf16: AVX-512 (GEMM, elementwise, norm, exp), AVX-512 BF16 (the bf16 GEMM), AVX2 "
                   "(attention rows, packing)",
    "avx512": "avx512: AVX-512 (GEMM, elementwise, norm, exp), AVX2 (attention rows, packing)",
    "avx2": "avx2: AVX2 and FMA",
}
peaks = {"fma": 0.0, "256": 0.0, "512": 0.0, "bf16": 0.0, "isa": "portable"}  # the best seen in the run
# The engine the bf16 rows ran on (bench's bf16_engine=; bench --peaks alone measures vdpbf16ps) and its words.
ENGINE = {"name": "avx512_bf16"}
ENGINES = {"amx": "amx: AMX tiles, tdpbf16ps, 16 x 16 x 32 multiply-adds per instruction",
           "avx512_bf16": "avx512_bf16: vdpbf16ps, 32 multiply-adds into 16 float sums per instruction",
           "fp32": "fp32: operands rounded to bf16, then the float FMA GEMM"}


def is_gpt(w):
    return w.startswith("gpt-")


def values(out):
    """The key=value pairs of a child's output, the last of each key winning."""
    kv = {}
    for word in out.split():
        k, eq, v = word.partition("=")
        if eq:
            kv[k] = v
    return kv


def number(kv, key):
    try:
        return float(kv[key])
    except (KeyError, ValueError):
        return math.nan


def child(argv, env=None, key="ms_per_step"):
    """The key=value pairs a child printed on stdout, or None when it failed (or printed no key)."""
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, text=True, env=env)
    except OSError as e:
        print(f"bench: cannot run {argv[0]}: {e.strerror}", file=sys.stderr)
        return None
    kv = values(p.stdout)
    return kv if p.returncode == 0 and not math.isnan(number(kv, key)) else None


def measure_peaks(a):
    """`bench --peaks`: the core's FMA peaks and bf16 dot-product peak, and the kernels' level."""
    kv = child([a.bench, "--peaks"], key="peak_gflops_per_core") or {}
    note_peaks(kv, False)
    peaks["isa"] = kv.get("isa", peaks["isa"])


def note_peaks(kv, bf16):
    """Keeps the best peaks a child measured (a gemm row measures its own; a bf16 row the bf16 one only)."""
    keys = [("peak_bf16", "bf16")] + ([] if bf16 else [("peak_gflops_per_core", "fma"), ("peak256", "256"),
                                                        ("peak512", "512")])
    for key, name in keys:
        v = number(kv, key)
        if not math.isnan(v):
            peaks[name] = max(peaks[name], v)
    if bf16 and kv.get("bf16_engine"):
        ENGINE["name"] = kv["bf16_engine"]
        # a gpt row's probe of that engine (bench_timing.h): without it a run of gpt rows alone (--only) would
        # name the engine beside --peaks' vdpbf16ps rate
        v = number(kv, "engine_gflops")
        if not math.isnan(v):
            peaks["bf16"] = max(peaks["bf16"], v)


def measure(a, w, threads, bf16):
    """One round of a row: tgrad, then PyTorch (while a.torch) with the steps tgrad ran."""
    r = {"ok": False, "torch_ok": False, "t": [], "best": 0}
    args = ["--workload", w, "--threads", str(threads)] + (["--text", a.text] if is_gpt(w) else []) + \
        (["--precision", "bf16"] if bf16 else [])
    steps = (["--steps", str(a.steps)] if a.steps > 0 else []) + (["--warmup", str(a.warmup)] if a.warmup >= 0 else [])
    kv = child([a.bench] + args + steps + ["--rounds", str(a.rounds)])
    if kv:
        r.update(ok=True, med=number(kv, "ms_per_step"), min=number(kv, "min_ms"), max=number(kv, "max_ms"),
                 gflop=number(kv, "gflop_per_step"), rss=number(kv, "rss_peak_mb"), arena=number(kv, "arena_step_mb"))
        note_peaks(kv, bf16)
        r["amx"] = [number(kv, "amx_gflops")] if bf16 else []  # the AMX probe at this round's start
        steps = ["--steps", kv["steps"], "--warmup", kv["warmup"]]
    if not a.torch or len(steps) < 4:
        return r
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    env.pop("OPENBLAS_CORETYPE", None)
    if a.coretype:
        env["OPENBLAS_CORETYPE"] = a.coretype
    if threads > 1:
        env["OMP_WAIT_POLICY"] = "passive"
    for v in ["nanogpt"] if is_gpt(w) else VARIANTS[:1] if w.startswith("gemm") else VARIANTS:
        kv = child([a.python, a.torch_script, "--variant", v] + args + steps, env)
        if not kv:
            print(f"bench: PyTorch ({a.python} {a.torch_script}) failed; going on with tgrad alone", file=sys.stderr)
            a.torch = False
            return r
        r["t"].append({k: number(kv, k) for k in ("ms_per_step", "min_ms", "max_ms", "rss_peak_mb")})
        a.torch_version, a.blas = kv.get("torch", "?"), kv.get("blas", "?")
    r["torch_ok"] = True
    r["best"] = best(r["t"])
    return r


def best(t):
    """The faster PyTorch variant of a row (the first when there is one)."""
    return 1 if len(t) == 2 and t[1]["ms_per_step"] < t[0]["ms_per_step"] else 0


def combine(rounds):
    """The rounds of a row as one (see the top of this file)."""
    r = dict(rounds[0])
    r["ok"] = all(x["ok"] for x in rounds)
    r["torch_ok"] = all(x["torch_ok"] for x in rounds)
    if r["ok"]:
        r["med"] = statistics.median(x["med"] for x in rounds)
        r["min"], r["max"] = min(x["min"] for x in rounds), max(x["max"] for x in rounds)
        r["rss"], r["arena"] = max(x["rss"] for x in rounds), max(x["arena"] for x in rounds)
        r["amx"] = [a for x in rounds for a in x.get("amx", [])]
    if r["torch_ok"]:
        r["t"] = [{"ms_per_step": statistics.median(x["t"][v]["ms_per_step"] for x in rounds),
                   "min_ms": min(x["t"][v]["min_ms"] for x in rounds),
                   "max_ms": max(x["t"][v]["max_ms"] for x in rounds),
                   "rss_peak_mb": max(x["t"][v]["rss_peak_mb"] for x in rounds)} for v in range(len(r["t"]))]
        r["best"] = best(r["t"])
    return r


def torch_med(r):
    return r["t"][r["best"]]["ms_per_step"]


def table_row(r, peak):
    """One line of the table, in Markdown (readable on a terminal too)."""
    if r["bf16"] and peaks["bf16"] > 0:
        peak = peaks["bf16"]  # a bf16 row's share is of the bf16 dot-product peak
    tg, pt, ratio, tg_perf, pt_perf, mem = "failed", "n/a", "n/a", "n/a", "n/a", "n/a"
    if r["ok"]:
        gf = r["gflop"] / (r["med"] * 1e-3)
        tg = f"{r['med']:.2f} ({r['min']:.2f}-{r['max']:.2f})"
        tg_perf = f"{gf:.1f} / {100 * gf / (r['threads'] * peak):.0f}%"
        mem = f"{r['rss']:.0f}"
    if r["torch_ok"]:
        b, t = r["best"], r["t"][r["best"]]
        pt = f"{t['ms_per_step']:.2f} ({t['min_ms']:.2f}-{t['max_ms']:.2f})"
        if len(r["t"]) == 2:
            pt += f" {VARIANTS[b]}; other {r['t'][1 - b]['ms_per_step']:.2f}"
        elif is_gpt(r["workload"]):
            pt += " nanogpt"
        if r["ok"]:
            gf = r["gflop"] / (t["ms_per_step"] * 1e-3)  # the same work as tgrad's step
            ratio = f"{t['ms_per_step'] / r['med']:.2f}x"
            pt_perf = f"{gf:.1f} / {100 * gf / (r['threads'] * peak):.0f}%"
        mem += f" / {t['rss_peak_mb']:.0f}"
    return f"| {name(r)} | {r['threads']} | {tg} | {pt} | {ratio} | {tg_perf} | {pt_perf} | {mem} |"


def name(r):
    return r["workload"] + (" bf16" if r["bf16"] else "")


def table(rows, peak):
    return ["| workload | threads | tgrad ms/step median (min-max) | PyTorch ms/step median (min-max) variant | "
            "torch/tgrad | tgrad GFLOP/s / of peak | PyTorch GFLOP/s / of peak | peak RSS MB tgrad / torch |",
            "|---|---|---|---|---|---|---|---|"] + [table_row(r, peak) for r in rows]


def geomean(rows, threads):
    """Geometric mean of torch/tgrad over the float rows with both, at one thread count, and their number."""
    logs = [math.log(torch_med(r) / r["med"]) for r in rows
            if r["threads"] == threads and not r["bf16"] and r["ok"] and r["torch_ok"]]
    return (math.exp(sum(logs) / len(logs)) if logs else math.nan), len(logs)


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    except OSError:
        return "unknown"
    names = [line[11:].strip() for line in out.splitlines() if line.startswith("Model name:")]
    return names[-1] if names else "unknown"


def s(n):
    return "s" if n > 1 else ""


def markdown(a, rows, peak, determinism, started):
    """BENCHMARKS.md's first sections, as lines."""
    out = ["# Benchmarks: tgrad vs PyTorch on the CPU", "",
           f"Written by `make bench` (`build/bin/bench --markdown {a.markdown}`); every number below comes from "
           "that run. The machine is shared and noisy, so tgrad and PyTorch were measured alternately, "
           f"{a.rounds} rounds of each row, and a time is the median of the rounds' medians (min-max over all "
           "their steps).", "",
           f"- date: {started}", f"- machine: {cpu_model()}, {os.sysconf('SC_NPROCESSORS_ONLN')} cores online"]
    wide = f"{peaks['512']:.1f} GFLOP/s" if peaks["512"] > 0 else "none (no AVX-512)"
    out.append("- measured single-precision FMA peak per core, best of all measurements in the run: 256-bit FMAs "
               f"{peaks['256']:.1f} GFLOP/s, 512-bit FMAs {wide}; \"of peak\" below is against the faster, "
               f"{peak:.1f} GFLOP/s")
    if peaks["bf16"] > 0:
        out.append(f"- measured peak per core of the bf16 products' engine ({ENGINES.get(ENGINE['name'], ENGINE['name'])}"
                   f"), best of the run: {peaks['bf16']:.1f} GFLOP/s ({peaks['bf16'] / peak:.2f}x the FMA peak); "
                   "\"of peak\" of a bf16 row is against it")
    out.append("- tgrad's kernels on this CPU (chosen at run time, src/tensor/simd.h): " +
               ISA.get(peaks["isa"], "portable: plain C loops"))
    out.append("- tgrad: float, its own thread pool (src/tensor/parallel.c: a waiting thread spins up to 200 "
               "microseconds while every thread has a free core, a microsecond or two while other programs want "
               "the cores, then sleeps; no OpenMP runtime)")
    if a.torch:
        core = (f"OPENBLAS_CORETYPE={a.coretype} (OpenBLAS detects this CPU as {a.detected_core}, a fallback to "
                "SSE kernels: it predates the CPU)" if a.coretype else
                f"OPENBLAS_CORETYPE unset (OpenBLAS's kernels: {a.detected_core})")
        out.append(f"- PyTorch {a.torch_version} via {a.python}, BLAS {a.blas}; {core}, "
                   "OMP/OPENBLAS/MKL_NUM_THREADS and torch.set_num_threads = threads, OMP_WAIT_POLICY=passive at "
                   "2 threads")
    else:
        out.append(f"- PyTorch: **not available** ({a.python} could not run {a.torch_script}); tgrad's numbers alone")
    out += ["", "## Workloads", "",
            "- toy: V 16, T 16, B 64, d 64, 4 heads, FFN 128, 2 blocks; mid: V 64, T 128, B 32, d 256, 8 heads, "
            "FFN 1024, 4 blocks. d2l post-norm Transformer encoder + Linear(d, V), cross-entropy at every "
            "position, reversing random sequences, Adam lr 1e-3, dropout 0.1. One step = zero_grad + forward "
            "+ loss + backward + Adam.",
            "- gpt-mini: nanoGPT's GPT, V 256, T 64, 2 layers, 4 heads, d 128, batch 32; gpt-small: V 256, "
            "T 128, 4 layers, 8 heads, d 256, batch 16. Byte windows of tests/data/fortunes_excerpt.txt read "
            "in the same order by both, AdamW lr 3e-4, no dropout; PyTorch runs nanoGPT's model.py (manual "
            "attention: torch < 2.0 has no scaled_dot_product_attention).",
            "- attn-T: one multi-head self-attention layer (d 64, 4 heads, batch 1, dropout 0.1), forward + "
            "backward of sum(output).",
            "- gemm-n: C = A B, n x n float.",
            "- `bf16` rows: tgrad with `--precision bf16` (tg_set_precision(TG_PREC_BF16): the products of "
            "Linear, matmul and attention with bf16 operands and float sums, forward and backward; the rest, the "
            "weights and AdamW in float; gemm-n: A and B stored as bf16, C float, tg_k_gemm_bf16_mixed), PyTorch with "
            "`torch.autocast(\"cpu\", dtype=torch.bfloat16)` around the forward and loss (gemm-n: torch.mm of "
            "bf16 tensors). Their \"of peak\" is against the bf16 dot-product peak.",
            "- PyTorch variants: `d2l` (d2l's MultiHeadAttention from nn.Linear) and `nn` "
            "(torch.nn.MultiheadAttention); the table uses the faster one and shows the other.",
            "- GFLOP/s counts GEMM flops only (3x the forward products for a training step); \"of peak\" is "
            "per core (GFLOP/s / threads / measured peak).", "", "## Results", ""]
    out += table(rows, peak)
    out += ["", "## Ratios (torch/tgrad > 1: tgrad is faster)", ""]
    for th in (1, 2):
        g, n = geomean(rows, th)
        if n:
            out.append(f"- {th} thread{s(th)}: geometric mean {g:.2f}x over {n} workloads")
    out += [f"- slower than PyTorch: {name(r)} at {r['threads']} thread{s(r['threads'])} ({torch_med(r) / r['med']:.2f}x)"
            for r in rows if r["ok"] and r["torch_ok"] and torch_med(r) < r["med"]]
    out += ["", "## Memory", "", "Peak RSS of each workload's own process (VmHWM), MB:", "",
            "| workload | threads | tgrad | tgrad arena per step | PyTorch d2l | PyTorch nn |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r["ok"] and not r["workload"].startswith("gemm"):
            t = [x["rss_peak_mb"] for x in r["t"]] if r["torch_ok"] else []
            torch = f" {t[0]:.0f} (nanoGPT) | - |" if len(t) == 1 else f" {t[0]:.0f} | {t[1]:.0f} |" if t else \
                " n/a | n/a |"
            out.append(f"| {name(r)} | {r['threads']} | {r['rss']:.0f} | {r['arena']:.1f} |{torch}")
    out += ["", "The PyTorch process includes the interpreter and libtorch (about 230 MB before any work)."]
    for r in rows:
        if r["workload"] == "mid" and r["ok"] and r["torch_ok"]:
            t = [x["rss_peak_mb"] for x in r["t"]]
            met = "met" if r["rss"] <= min(t) else "met against one variant only" if r["rss"] <= max(t) else "NOT met"
            out += ["", f"Target, mid at {r['threads']} thread{s(r['threads'])} (tgrad's peak RSS no higher than "
                    f"PyTorch's): tgrad {r['rss']:.0f} MB, PyTorch {t[0]:.0f} MB (d2l) / {t[1]:.0f} MB (nn): {met}"]
    # The bf16 rows against their fp32 twins, and issue 31's goals (on a CPU
    # with AMX): gemm-1024 bf16 >= 8x tgrad fp32 at 1 thread; gpt-small bf16
    # >= 2.5x tgrad fp32 and >= 2x PyTorch autocast, its peak RSS <= 0.75x
    # the fp32 run's.
    pairs = [(b, f) for b in rows if b["bf16"] and b["ok"] for f in rows
             if not f["bf16"] and f["ok"] and f["threads"] == b["threads"] and f["workload"] == b["workload"]]
    if pairs:
        out += ["", "## bf16 products against float", "",
                f"The bf16 products ran on the {ENGINE['name']} engine. Goals (issue 31, on a CPU with AMX): gemm-1024 "
                "bf16 at least 8x tgrad's fp32 at 1 thread; gpt-small bf16 at least 2.5x tgrad's fp32 and 2x PyTorch "
                "with autocast, with a peak RSS at most 0.75x its fp32 run's.", "",
                "The last column is the AMX engine's rate as the library's probe measured it at the start of each "
                "round of the bf16 row (tdpbf16ps on tiles in registers, one core): on a shared machine it moves "
                "with what the other tenants of the core run, and a round's steps with it.", "",
                "| workload | threads | tgrad fp32 / tgrad bf16 | PyTorch autocast bf16 / tgrad bf16 | "
                "peak RSS MB tgrad bf16 / fp32 (ratio) | peak RSS MB tgrad bf16 / autocast | AMX probe by round, "
                "GFLOP/s |",
                "|---|---|---|---|---|---|---|"]
    for b, f in pairs:
        pt, mem = (f"{b['t'][0]['ms_per_step'] / b['med']:.2f}x", f"{b['rss']:.0f} / {b['t'][0]['rss_peak_mb']:.0f}") \
            if b["torch_ok"] else ("n/a", "n/a")
        own = f"{b['rss']:.0f} / {f['rss']:.0f} ({b['rss'] / f['rss']:.2f}x)" if f["rss"] > 0 else "n/a"
        probes = ", ".join(f"{a:,.0f}" for a in b.get("amx", []) if a > 0) or "-"
        out.append(f"| {b['workload']} | {b['threads']} | {f['med'] / b['med']:.2f}x | {pt} | {own} | {mem} | {probes} |")
    out += ["", "## Determinism", "", f"`build/bin/bench --check-determinism`: {determinism}", "",
            "## Commands", "", "```sh",
            f"make bench     # sh tools/install-bench-deps.sh; build/bin/bench --markdown {a.markdown}",
            "# one measurement of the table:", "build/bin/bench --workload WORKLOAD --threads N",
            f"env {'OPENBLAS_CORETYPE=' + a.coretype if a.coretype else '-u OPENBLAS_CORETYPE'} OMP_NUM_THREADS=N "
            "OPENBLAS_NUM_THREADS=N MKL_NUM_THREADS=N \\",
            f"    {a.python} {a.torch_script} --workload WORKLOAD --threads N --variant d2l|nn",
            "# (plus OMP_WAIT_POLICY=passive at N=2)", "```"]
    return out


def write_atomic(path, lines):
    """The file at path replaced whole (a temporary beside it, renamed), or the reason it could not be."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        return f"cannot write {path}: {e.strerror}"
    return None


# OpenBLAS's name for the kernels of each instruction set, newest first, and
# the cpuinfo flags a CPU needs to run them.
CORETYPES = [("SkylakeX", {"avx512f", "avx512bw", "avx512vl", "avx512dq"}), ("Haswell", {"avx2", "fma"})]
LEGACY_CORES = {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "katmai", "coppermine", "northwood"}


def openblas_coretype(python):
    """The OPENBLAS_CORETYPE PyTorch's matmuls run with: none (OpenBLAS detects
    the CPU), unless OpenBLAS does not know this CPU and falls back to SSE
    kernels, then the newest kernels the CPU's flags allow. Debian 12's
    OpenBLAS 0.3.21 predates Emerald Rapids (family 6 model 207) and runs its
    Prescott kernels there: float GEMM 4-8x slower than its SkylakeX ones,
    which would compare tgrad with a PyTorch far from its best. The
    environment's own OPENBLAS_CORETYPE (set on some machines for older
    builds) is never used for PyTorch here."""
    probe = ("import ctypes, ctypes.util\n"
             "l = ctypes.CDLL(ctypes.util.find_library('openblas') or 'libopenblas.so.0')\n"
             "l.openblas_get_corename.restype = ctypes.c_char_p\n"
             "print(l.openblas_get_corename().decode())")
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    try:
        core = subprocess.run([python, "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              env=env, timeout=60).stdout.strip()
        with open("/proc/cpuinfo") as f:
            flags = set(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))
    except (OSError, subprocess.SubprocessError):
        return None, "?"
    if core.lower() not in LEGACY_CORES:
        return None, core or "?"
    return next((name for name, need in CORETYPES if need <= flags), None), core


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", required=True, help="tgrad's bench program")
    ap.add_argument("--only", help="comma-separated workloads (default all)")
    ap.add_argument("--rounds", type=int, default=3, help="tgrad and PyTorch measured alternately this many times")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (0: each workload's default)")
    ap.add_argument("--warmup", type=int, default=-1, help="warm-up steps (-1: each workload's default)")
    ap.add_argument("--markdown", help="also write the comparison to this file")
    ap.add_argument("--no-torch", action="store_true", help="tgrad alone")
    ap.add_argument("--python", default="/usr/bin/python3", help="Python with torch")
    ap.add_argument("--torch-script", default="bench/torch_ref.py", help="the PyTorch side")
    ap.add_argument("--text", default="tests/data/fortunes_excerpt.txt", help="the gpt workloads' text")
    a = ap.parse_args()
    only = a.only.split(",") if a.only else WORKLOADS
    for w in only:  # a typo would give an empty table
        if w not in WORKLOADS:
            print(f"bench: --only: unknown workload '{w}'\nbench: run with --help for usage", file=sys.stderr)
            return 2
    a.torch = not a.no_torch and os.access(a.torch_script, os.R_OK) and os.access(a.python, os.X_OK)
    a.torch_version, a.blas = "?", "?"
    a.coretype, a.detected_core = openblas_coretype(a.python) if a.torch else (None, "?")
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    measure_peaks(a)
    rows = []
    for w, bf16 in [(w, False) for w in WORKLOADS] + [(w, True) for w in BF16_WORKLOADS]:
        for th in (1, 2) if w in only else ():
            print(f"bench: {w:<9}{' bf16' if bf16 else ''} {th} thread{s(th) or ' '}:", end="", file=sys.stderr,
                  flush=True)
            rounds = []
            for _ in range(a.rounds):
                r = measure(a, w, th, bf16)
                rounds.append(r)
                print(f" {r.get('med', math.nan):.2f}/{torch_med(r) if r['torch_ok'] else math.nan:.2f}", end="",
                      file=sys.stderr, flush=True)
            rows.append(dict(combine(rounds), workload=w, threads=th, bf16=bf16))
            print(" ms (tgrad/PyTorch by round)", file=sys.stderr)
    measure_peaks(a)
    peak = peaks["fma"]
    print(f"FMA peak: {peak:.1f} GFLOP/s per core (single precision, best of all measurements; 256-bit "
          f"{peaks['256']:.1f}, 512-bit {peaks['512']:.1f})")
    if peaks["bf16"] > 0:
        print(f"bf16 engine peak ({ENGINE['name']}): {peaks['bf16']:.1f} GFLOP/s per core")
    if not a.torch:
        print(f"note: PyTorch could not be run ({a.python} {a.torch_script}): tgrad's numbers alone")
    p = subprocess.run([a.bench, "--check-determinism"], stdout=subprocess.PIPE, text=True)
    determinism = p.stdout.strip() or f"FAIL: bench --check-determinism exited {p.returncode}"
    print("\n" + "\n".join(table(rows, peak)) + f"\n\ndeterminism: {determinism}")
    for th in (1, 2):
        g, n = geomean(rows, th)
        if n:
            print(f"torch/tgrad at {th} thread{s(th)}: geometric mean {g:.2f}x")
    if a.markdown:
        err = write_atomic(a.markdown, markdown(a, rows, peak, determinism, started))
        if err:
            print(f"bench: {err}", file=sys.stderr)
            return 1
        print(f"wrote {a.markdown}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
