#!/usr/bin/env python3
"""The README's speed summary, rewritten from BENCHMARKS.md (make bench runs it
last), so that the README quotes the last run and nothing else.

    python3 tools/readme_bench.py [BENCHMARKS.md [README.md]]

Rewrites three blocks of the README, each between `<!-- NAME: begin -->` and
`<!-- NAME: end -->`:
- bench: PyTorch time / tgrad time per workload and thread count, the peaks
  measured in that run and the GPT steps' memory;
- bench-tokenizer: the tokenizer's speed against tiktoken;
- bench-vocab: what a trained BPE buys lm against bytes.
Standard library only. Exits 1, changing nothing, when a number it needs is
missing from BENCHMARKS.md (a run without PyTorch, say).
"""
import os
import re
import sys


ROWS = [  # (workload in BENCHMARKS.md, what the README calls it)
    ("toy", "toy encoder step (T 16, d 64)"),
    ("mid", "mid encoder step (T 128, d 256)"),
    ("gpt-mini", "gpt-mini step (nanoGPT's model, T 64, 2 layers, d 128, batch 32)"),
    ("gpt-small", "gpt-small step (T 128, 4 layers, d 256, batch 16)"),
    ("gpt-small bf16", "gpt-small with bf16 products, against PyTorch's autocast"),
    ("gemm-1024 bf16", "GEMM 1024 of bf16 matrices, against torch.mm of bf16 tensors"),
    ("attn-4096", "attention layer, T 4096 (fused)"),
    ("gemm-1024", "GEMM 1024"),
]


def table(text, heading):
    """The rows of the markdown table under `## heading`, as lists of cells."""
    m = re.search(r"^## " + re.escape(heading) + r"[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not m:
        sys.exit(f"readme_bench: no '## {heading}' section in BENCHMARKS.md")
    rows = [line.strip().strip("|").split("|") for line in m.group(1).splitlines() if line.startswith("|")]
    return [[c.strip() for c in r] for r in rows[2:]]  # past the header and its rule


def replace_block(readme, name, lines):
    """The lines between the block's markers replaced, indented as its begin marker."""
    m = re.search(r"^( *)<!-- " + re.escape(name) + r": begin -->\n.*?^ *<!-- " + re.escape(name) + r": end -->$",
                  readme, re.S | re.M)
    if not m:
        sys.exit(f"readme_bench: the README has no <!-- {name}: begin --> ... end block")
    pad = m.group(1)
    block = "\n".join([f"{pad}<!-- {name}: begin -->"] + [pad + line for line in lines] + [f"{pad}<!-- {name}: end -->"])
    return readme[:m.start()] + block + readme[m.end():]


def table_lines(text, heading):
    """The markdown table under `## heading`, as it stands."""
    m = re.search(r"^## " + re.escape(heading) + r"[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    lines = [line for line in (m.group(1).splitlines() if m else []) if line.startswith("|")]
    if not lines:
        sys.exit(f"readme_bench: no '## {heading}' table in BENCHMARKS.md")
    return lines


def tokenizer_lines(text):
    rows = {r[0]: r for r in table(text, "Tokenizer")}
    fortunes, multi = rows.get("fortunes corpus"), rows.get("multilingual (repeated)")
    train = re.search(r"^BPE training, (\d+) ids .*?\(([0-9.]+) MB\): ([0-9.]+ s)", text, re.M)
    if not (fortunes and multi and train):
        sys.exit("readme_bench: the tokenizer section of BENCHMARKS.md lacks its speeds or training time")
    return [f"Tokenizers (same run, single thread): tgrad encodes GPT-2's BPE at {fortunes[2]} MB/s",
            f"on the fortunes corpus and {multi[2]} MB/s on the multilingual seed documents,",
            f"{fortunes[5]} and {multi[5]} tiktoken's WASM build under node, with identical ids; a",
            f"{train.group(1)}-id BPE trains on the {train.group(2)} MB corpus in {train.group(3)}."]


def main():
    bench_path = sys.argv[1] if len(sys.argv) > 1 else "BENCHMARKS.md"
    readme_path = sys.argv[2] if len(sys.argv) > 2 else "README.md"
    text = open(bench_path, encoding="utf-8").read()
    results = {(r[0], r[1]): r for r in table(text, "Results")}
    memory = {(r[0], r[1]): r for r in table(text, "Memory")}

    def cell(workload, threads, col):
        r = results.get((workload, str(threads)))
        if not r or r[col] in ("n/a", "failed"):
            sys.exit(f"readme_bench: BENCHMARKS.md has no {workload} at {threads} thread(s)")
        return r[col]

    out = ["| workload | 1 thread | 2 threads |", "|---|---|---|"]
    for workload, name in ROWS:
        if workload == "gemm-1024":  # with its share of the FMA peak
            shares = [cell(workload, t, 5).split("/")[1].strip() for t in (1, 2)]
            name += f" ({shares[0]} / {shares[1]} of the FMA peak)"
        if workload == "attn-4096":  # and its memory against PyTorch's
            m = memory.get((workload, "1"))
            if m:
                name += f", peak RSS {m[2]} vs {min(int(m[4]), int(m[5]))} MB"
        out.append(f"| {name} | {cell(workload, 1, 4)} | {cell(workload, 2, 4)} |")

    peaks = re.search(r"256-bit FMAs ([0-9.]+) GFLOP/s, 512-bit FMAs ([0-9.]+ GFLOP/s|none[^;]*)", text)
    # the bf16 products' engine and its measured peak (older runs: vdpbf16ps, "dot-product peak")
    engine = re.search(r"peak per core of the bf16 products' engine \((\w+)[^)]*\), best of the run: ([0-9.]+) GFLOP/s",
                       text)
    bf16 = re.search(r"bf16 dot-product peak per core.*?best of the run: ([0-9.]+) GFLOP/s", text)
    date = re.search(r"^- date: (.*)$", text, re.M)
    machine = re.search(r"^- machine: (.*)$", text, re.M)
    if not (peaks and date and machine):
        sys.exit("readme_bench: BENCHMARKS.md lacks its date, machine or FMA peaks")
    out.append("")
    out.append(f"Measured {date.group(1)} on {machine.group(1)}: FMA peak per core {peaks.group(1)} GFLOP/s with "
               f"256-bit FMAs, {peaks.group(2)} with 512-bit ones" +
               (f", bf16 products on the {engine.group(1)} engine {engine.group(2)} GFLOP/s." if engine else
                f", bf16 dot products {bf16.group(1)} GFLOP/s." if bf16 else "."))
    lines = []
    for workload in ("gpt-mini", "gpt-small", "gpt-small bf16"):
        m = memory.get((workload, "1"))
        if m:
            lines.append(f"{workload} {m[2]} vs {m[4].split()[0]} MB")
    if lines:
        out.append("Peak RSS at 1 thread, tgrad vs PyTorch: " + ", ".join(lines) + ".")
    if "## bf16 products against float" in text:
        bf = [r for r in table(text, "bf16 products against float") if r[0].startswith("gpt")]
        out.append("bf16 products against tgrad's own float step: " +
                   ", ".join(f"{w} {r} at {t} thread{'s' if t != '1' else ''}" for w, t, r, *_ in bf) + ".")

    readme = open(readme_path, encoding="utf-8").read()
    readme = replace_block(readme, "bench", out)
    readme = replace_block(readme, "bench-tokenizer", tokenizer_lines(text))
    readme = replace_block(readme, "bench-vocab", table_lines(text, "What a vocabulary buys"))
    new = readme
    tmp = readme_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, readme_path)
    print(f"readme_bench: {readme_path}'s speed summary from {bench_path}")


if __name__ == "__main__":
    main()
