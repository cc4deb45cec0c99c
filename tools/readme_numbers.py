#!/usr/bin/python3
"""The README's numbers and figures, made by the programs that own them.

    /usr/bin/python3 tools/readme_numbers.py run [BLOCK...]   # make readme-numbers
    /usr/bin/python3 tools/readme_numbers.py render           # README from the recorded outputs
    /usr/bin/python3 tools/readme_numbers.py check [--rerun]  # make test: README = recorded outputs

`run` runs each block's program (all blocks but `test-time` when none is
named; `make readme-numbers` names them all), records its output in
docs/readme_numbers/BLOCK.txt (the command, the CPU, then what it printed),
copies the figures it drew into docs/, and rewrites the README's block

    <!-- readme:BLOCK -->
    ...
    <!-- /readme:BLOCK -->

from that file. Running it twice changes only what the programs print
differently (times); nothing else in the README is touched.

Figures that depend on the instruction set (the kernels sum in different
orders at each width) are made with TG_ISA=avx2, which every x86-64 machine
this project runs on has, and each block says so, so any such machine
reproduces them to the digit. Times are the recording machine's, and its
CPU is named beside them.

`check` (run by `make test`) fails when a block differs from what `render`
makes of the recorded output, or when a recorded command is not the one
`run` would use now. A full rerun of every block takes minutes (lm's default
run alone 1.5-3), too long for the suite; with `--rerun BUILD` it also
reruns the cheap rows (one extrapolate variant, one reverse variant: a few
seconds each; lm's first 300 steps on the default run's schedule: about
half a minute) with the block's exact flags and seed, and compares them
with the recorded rows, so a kernel change that moves a figure without a
regeneration fails the suite. (lm's transcript had drifted once, from a
change of a sum's order after its recording, before lm was among them.)

Standard library only; run with /usr/bin/python3 (Debian's), as make does.
"""
import hashlib
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = os.path.join(ROOT, "docs", "readme_numbers")
ISA = "avx2"  # every x86-64 machine used has it; see src/tensor/simd.c

# Each block: the program and flags it runs (from a scratch directory, so
# `out/...` in its output is the README's default), the figures it draws
# (copied from the scratch directory into docs/), whether its figures depend
# on the instruction set (TG_ISA=avx2), and how the README block is made
# from its output.
BLOCKS = {
    "demo-table": {"argv": ["reverse", "--out", "out"], "isa": True,
                   "figures": ["reverse_loss.png", "reverse_attention_fixed.png", "reverse_attention_none.png",
                               "reverse_pe_tables.png"]},
    "lm-transcript": {"argv": ["lm"], "isa": True, "figures": ["lm/lm_loss.png", "lm/lm_attention.png"]},
    "extrapolate-tables": {"argv": ["extrapolate", "--out", "out"], "isa": True,
                           "figures": ["extrapolate_shift.png", "extrapolate_reverse.png", "extrapolate_relative.png",
                                       "extrapolate_alibi.png", "extrapolate_rope.png"]},
    "compare-table": {"argv": ["compare_layers", "--out", "out", "--threads", "1"], "isa": True,
                      "figures": ["compare_time.png", "compare_table.png", "compare_paths.png",
                                  "compare_learning.png"]},
    # The same output as compare-table, its learning section.
    "compare-learning": {"same_as": "compare-table"},
    # `make test` itself, from the source tree: its CPU time (user + sys of
    # the command and everything it waited for) and wall time.
    "test-time": {"make": ["make", "test"], "isa": False, "figures": []},
}
ORDER = ["demo-table", "lm-transcript", "extrapolate-tables", "compare-table", "compare-learning", "test-time"]

# Cheap reruns for `check --rerun`: one variant of a block's program with the
# block's flags (a run's numbers depend only on the seed and its own variant).
RERUNS = [
    ("extrapolate-tables", ["extrapolate", "--out", "out", "--task", "reverse", "--pe", "rope"]),
    ("demo-table", ["reverse", "--out", "out", "--pe", "none"]),
    # lm's first 300 steps on the default run's schedule (--decay-steps 1200):
    # its losses at steps 100-300 are the recorded run's (a quarter of it)
    ("lm-transcript", ["lm", "--out", "out/lm", "--steps", "300", "--decay-steps", "1200"]),
]


def die(msg):
    sys.exit(f"readme_numbers: {msg}")


def cpu_name():
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return re.sub(r"\s+", " ", line.split(":", 1)[1].strip())
    except OSError:
        pass
    return platform.processor() or "an unknown CPU"


def command_line(name):
    """The command a block's record names: what `run` executes, as a user would type it."""
    b = BLOCKS[name]
    if "make" in b:
        return " ".join(b["make"])
    env = f"TG_ISA={ISA} " if b["isa"] else ""
    return env + " ".join(["build/bin/" + b["argv"][0]] + b["argv"][1:])


def run_program(build, argv, isa, cwd):
    """Runs build/bin/argv[0] in cwd with stdout and stderr in one stream, line
    buffered (stdbuf) so that they interleave as on a terminal."""
    env = dict(os.environ)
    env.pop("TG_ISA", None)
    if isa:
        env["TG_ISA"] = ISA
    exe = os.path.join(ROOT, build, "bin", argv[0])
    if not os.access(exe, os.X_OK):
        die(f"{exe} is missing: build the programs first (make programs)")
    cmd = ([shutil.which("stdbuf"), "-oL", "-eL"] if shutil.which("stdbuf") else []) + [exe] + argv[1:]
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        die(f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout[-3000:]}")
    return p.stdout


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def record_path(name):
    return os.path.join(RECORDS, name + ".txt")


def write_record(name, output, extra=""):
    os.makedirs(RECORDS, exist_ok=True)
    head = (f"# command: {command_line(name)}\n"
            f"# cpu: {cpu_name()}, {os.cpu_count()} cores online\n"
            f"# date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n{extra}")
    tmp = record_path(name) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(head + output)
    os.replace(tmp, record_path(name))


def read_record(name):
    """(header fields, output lines) of a block's record."""
    src = BLOCKS[name].get("same_as", name)
    try:
        text = open(record_path(src), encoding="utf-8").read()
    except OSError:
        die(f"no {record_path(src)}: run tools/readme_numbers.py run {src}")
    lines = text.split("\n")
    head = {"figures": []}
    while lines and lines[0].startswith("# "):
        k, _, v = lines.pop(0)[2:].partition(": ")
        if k == "figure":
            head["figures"].append(v.split(" sha256 "))
        else:
            head[k] = v
    return head, lines


def provenance(head, what="Made by"):
    isa = (" (`TG_ISA=avx2`: any x86-64 CPU with AVX2 prints the same figures; the times are the machine's)"
           if "TG_ISA=" in head.get("command", "") else "")
    return (f"<sub>{what} `make readme-numbers`: `{head.get('command')}`{isa}; "
            f"on {head.get('cpu')}, {head.get('date')}.</sub>")


# ---- renderers: output lines -> the block's lines ----

def render_demo_table(head, out):
    start = next((i for i, l in enumerate(out) if l.startswith("PE ") and "token acc" in l), None)
    end = next((i for i, l in enumerate(out) if l.startswith("No positional encoding:")), None)
    if start is None or end is None:
        die("demo-table: reverse printed no table (PE ... No positional encoding:)")
    return ["```"] + out[start:end + 1] + ["```", "", provenance(head)]


def render_lm_transcript(head, out):
    steps = [i for i, l in enumerate(out) if re.match(r"step +\d+/\d+ ", l)]
    trained = next((i for i, l in enumerate(out) if l.startswith("trained steps")), None)
    sample = next((i for i, l in enumerate(out) if l.startswith("--- sample")), None)
    val = next((i for i, l in enumerate(out) if l.startswith("val_loss=")), None)
    if not steps or trained is None or sample is None or val is None:
        die("lm-transcript: lm's output lacks its step, trained, sample or val_loss lines")
    lines = ["```", "$ build/bin/lm"] + out[:steps[0] + 1]
    if len(steps) > 1:
        lines += ["..."] if steps[-1] > steps[0] + 1 else []
        lines += [out[steps[-1]]]
    lines += out[trained:val + 1] + ["```", "", provenance(head)]  # what it wrote, the sample, the loss
    return lines


def extrapolate_tables(out):
    """{task: (lengths, [(kind, [cell...])...])} from extrapolate's summary."""
    tables = {}
    for i, l in enumerate(out):
        m = re.match(r"(\w+) task: held-out token accuracy by test length", l)
        if not m:
            continue
        lens = out[i + 1].split()[1:]  # past the "pe" column
        rows = []
        for r in out[i + 2:]:
            cells = r.split()
            if len(cells) != len(lens) + 1 or r.startswith(" "):
                break
            rows.append((cells[0], cells[1:]))
        tables[m.group(1)] = (lens, rows)
    return tables


def render_extrapolate(head, out):
    tables = extrapolate_tables(out)
    if set(tables) != {"shift", "reverse"}:
        die("extrapolate-tables: extrapolate printed no shift and reverse tables")
    runs = next((l for l in out if re.match(r"\d+ runs in \d+ s$", l)), "")
    lines = []
    for task in ("shift", "reverse"):
        lens, rows = tables[task]
        lines += [f"| {task} | " + " | ".join(lens) + " |", "|---" * (len(lens) + 1) + "|"]
        lines += [f"| {k} | " + " | ".join(c) + " |" for k, c in rows] + [""]
    return lines + [provenance(head) + (f" {runs}." if runs else "")]


COMPARE_ROWS = {  # compare_layers' kind -> the README's name for the layer
    "cnn": "CNN (k = 3)", "rnn": "RNN", "gru": "GRU", "attention": "self-attention (fused)",
    "attention-stored": "self-attention (stored)", "mha": "multi-head (4 heads)"}
LEARN_ROWS = {"cnn": "CNN, 2 layers k = 3", "rnn": "RNN, 2 layers", "gru": "GRU, 1 layer",
              "mha": "multi-head attention + sinusoidal PE"}


def render_compare_table(head, out):
    i = next((i for i, l in enumerate(out) if l.startswith("5. the chapter's table")), None)
    if i is None:
        die("compare-table: compare_layers printed no table (5. the chapter's table)")
    lines = ["| layer | chapter: cost | measured: time ~ n^a, n 256..4096 | chapter: sequential ops "
             "| measured: ops on the critical path, n = 16 / 64 / 256 | chapter: max path length "
             "| measured: layers until y_{n-1} depends on x_0, n = 8 / 16 / 32 / 64 |", "|---|---|---|---|---|---|---|"]
    for r in out[i + 2:]:
        m = re.match(r"(\S+)\s+(\S+)\s+(\S+)\s+\|\s+a=(\S+)\s+(\S+)\s+(\S+)\s+\(path (\S+)\)$", r)
        if not m:
            break
        k, cost, seq, a, seqm, path, pathc = m.groups()
        lines.append(f"| {COMPARE_ROWS.get(k, k)} | {cost} | a = {a} | {seq} | {seqm.replace('/', ' / ')} | {pathc} "
                     f"| {path.replace('/', ' / ')} |")
    if len(lines) != 2 + len(COMPARE_ROWS):
        die("compare-table: the table has not one row per layer kind")
    return lines + ["", provenance(head)]


def render_compare_learning(head, out):
    i = next((i for i, l in enumerate(out) if l.startswith("4. held-out accuracy")), None)
    if i is None:
        die("compare-learning: compare_layers printed no learning table (4. held-out accuracy)")
    dists = out[i + 1].split()[2:]
    lines = ["| layer | params | " + " | ".join(d.replace("m=", "m=") for d in dists) + " |",
             "|---" * (len(dists) + 2) + "|"]
    for r in out[i + 2:]:  # each learner's progress lines (stderr) come before its row
        if r.startswith("5. "):
            break
        cells = r.split()
        if len(cells) == len(dists) + 2 and cells[0] in LEARN_ROWS and all(c.endswith("%") for c in cells[2:]):
            lines.append(f"| {LEARN_ROWS[cells[0]]} | " + " | ".join(cells[1:]) + " |")
    if len(lines) != 2 + len(LEARN_ROWS):
        die("compare-learning: the learning table has not one row per learner")
    return lines + ["", provenance(head, "From the same run of")]


def render_test_time(head, out):
    m = {k: v for k, _, v in (l.partition("=") for l in out if "=" in l)}
    if "cpu_minutes" not in m or "wall_minutes" not in m:
        die("test-time: the record has no cpu_minutes= and wall_minutes= lines")
    how = head.get("source", "measured as it ran by `make readme-numbers`")
    return [f"`make test` took {m['wall_minutes']} minutes on {head.get('cpu')} ({head.get('date')}, the",
            f"machine perhaps shared) and {m['cpu_minutes']} minutes of CPU (user + sys of `make test` and",
            f"everything it ran; {how})."]


RENDER = {"demo-table": render_demo_table, "lm-transcript": render_lm_transcript,
          "extrapolate-tables": render_extrapolate, "compare-table": render_compare_table,
          "compare-learning": render_compare_learning, "test-time": render_test_time}


# ---- the README's blocks ----

def block_re(name):
    return re.compile(r"^<!-- readme:" + re.escape(name) + r" -->\n(.*?)^<!-- /readme:" + re.escape(name) + r" -->$",
                      re.S | re.M)


def rendered(name):
    head, out = read_record(name)
    return "\n".join(RENDER[name](head, out)) + "\n"


def rewrite_readme(readme_path, names):
    text = open(readme_path, encoding="utf-8").read()
    for name in names:
        m = block_re(name).search(text)
        if not m:
            die(f"{readme_path} has no <!-- readme:{name} --> ... <!-- /readme:{name} --> block")
        text = text[:m.start(1)] + rendered(name) + text[m.end(1):]
    tmp = readme_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, readme_path)


def run(build, names):
    names = list(dict.fromkeys(BLOCKS[n].get("same_as", n) for n in names))
    for name in names:
        b = BLOCKS[name]
        if "same_as" in b:
            continue
        print(f"readme_numbers: {name}: {command_line(name)}", flush=True)
        if "make" in b:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
            p = subprocess.run(b["make"], cwd=ROOT, env=env)  # as a user runs it, not as make's child
            wall = time.monotonic() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if p.returncode != 0:
                die(f"make test failed (exit {p.returncode}); the README keeps its old time")
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            write_record(name, f"cpu_minutes={cpu / 60:.1f}\nwall_minutes={wall / 60:.1f}\n")
            rewrite_readme(os.path.join(ROOT, "README.md"), [name])
            continue
        with tempfile.TemporaryDirectory(prefix="readme-numbers-") as scratch:
            out = run_program(build, b["argv"], b["isa"], scratch)
            kept = os.path.join(tempfile.gettempdir(), f"readme-numbers-{name}.txt")
            with open(kept, "w", encoding="utf-8") as f:  # for a look when the README cannot use it
                f.write(out)
            for n in ORDER:  # refuse an output the README cannot use before keeping it
                if n == name or BLOCKS[n].get("same_as") == name:
                    RENDER[n]({}, out.split("\n"))
            figs = ""
            for fig in b["figures"]:
                src = os.path.join(scratch, "out", fig)
                if not os.path.isfile(src):
                    die(f"{name}: {' '.join(b['argv'])} wrote no out/{fig}")
                figs += f"# figure: docs/{os.path.basename(fig)} sha256 {sha256(src)}\n"
            for fig in b["figures"]:
                shutil.copyfile(os.path.join(scratch, "out", fig), os.path.join(ROOT, "docs", os.path.basename(fig)))
            write_record(name, out, figs)
        # The README follows each record at once, so that it always matches
        # the records (the test-time block runs make test, which checks that).
        rewrite_readme(os.path.join(ROOT, "README.md"),
                       [n for n in ORDER if n == name or BLOCKS[n].get("same_as") == name])


def check(readme_path, rerun_build):
    text = open(readme_path, encoding="utf-8").read()
    bad = []
    for name in ORDER:
        m = block_re(name).search(text)
        if not m:
            bad.append(f"{name}: README.md has no <!-- readme:{name} --> block")
            continue
        head, _ = read_record(name)
        src = BLOCKS[name].get("same_as", name)
        if head.get("command") != command_line(src):
            bad.append(f"{name}: recorded '{head.get('command')}', but the script runs '{command_line(src)}'")
        for fig, digest in head["figures"] if name == src else []:
            path = os.path.join(ROOT, fig)
            if not os.path.isfile(path) or sha256(path) != digest:
                bad.append(f"{name}: {fig} is not the figure its program drew (docs/readme_numbers/{src}.txt "
                           "holds its hash): regenerate it (make readme-numbers)")
        want = rendered(name)
        if m.group(1) != want:
            bad.append(f"{name}: README.md's block differs from docs/readme_numbers/{src}.txt; "
                       f"regenerate it (make readme-numbers) rather than edit it. Expected:\n{want}")
    if rerun_build:
        for name, argv in RERUNS:
            with tempfile.TemporaryDirectory(prefix="readme-check-") as scratch:
                got = run_program(rerun_build, argv, True, scratch).split("\n")
            _, out = read_record(name)
            bad += compare_rerun(name, argv, out, got)
    for b in bad:
        print("readme_numbers: " + b, file=sys.stderr)
    if not bad:
        print(f"readme_numbers: {len(ORDER)} README blocks match their recorded outputs"
              + (f", {len(RERUNS)} reruns their rows" if rerun_build else ""))
    return 1 if bad else 0


def lm_steps(lines):
    """lm's progress lines: {step: (loss, val, lr)}, without the times."""
    r = re.compile(r"step +(\d+)/\d+ +loss (\S+) +val (\S+) +lr (\S+)")
    return {m.group(1): m.group(2, 3, 4) for m in map(r.match, lines) if m}


def compare_rerun(name, argv, recorded, got):
    """The rerun's rows against the same rows of the recorded full run."""
    if name == "lm-transcript":
        rec, new = lm_steps(recorded), lm_steps(got)
        bad = [s for s in new if rec.get(s) != new[s]]
        if not new or bad:
            s = bad[0] if bad else "100"
            return [f"{name}: {' '.join(argv)} now gives step {s} (loss, val, lr) {new.get(s)}, the README "
                    f"{rec.get(s)}: regenerate (make readme-numbers)"]
        return []
    if name == "extrapolate-tables":
        task, kind = argv[argv.index("--task") + 1], argv[argv.index("--pe") + 1]
        rec = dict(extrapolate_tables(recorded).get(task, ([], []))[1])
        new = dict(extrapolate_tables(got).get(task, ([], []))[1])
        if kind not in new or rec.get(kind) != new[kind]:
            return [f"{name}: {' '.join(argv)} now gives {task}/{kind} {new.get(kind)}, the README "
                    f"{rec.get(kind)}: regenerate (make readme-numbers)"]
        return []
    kind = argv[argv.index("--pe") + 1]

    def row(lines):  # the variant's accuracies and first >= 99%, without its time
        r = next((l for l in lines if re.match(re.escape(kind) + r" +[0-9.]+% ", l)), "")
        return r.rsplit(None, 1)[0] if r else None
    if row(got) is None or row(recorded) != row(got):
        return [f"{name}: {' '.join(argv)} now gives '{row(got)}', the README '{row(recorded)}': "
                "regenerate (make readme-numbers)"]
    return []


def main():
    args = sys.argv[1:]
    if not args or args[0] not in ("run", "render", "check") or "--help" in args:
        print(__doc__)
        return 0 if "--help" in args else 2
    build = "build"
    if "--build" in args:
        i = args.index("--build")
        if i + 1 >= len(args):
            die("--build needs a directory")
        build = args[i + 1]
        del args[i:i + 2]
    cmd, rest = args[0], args[1:]
    if cmd == "check":
        rerun = None
        if "--rerun" in rest:
            rerun = build
            rest.remove("--rerun")
        if rest:
            die(f"check takes no block names ({' '.join(rest)})")
        return check(os.path.join(ROOT, "README.md"), rerun)
    unknown = [n for n in rest if n not in BLOCKS]
    if unknown:
        die(f"unknown block {' '.join(unknown)}; the blocks are {', '.join(ORDER)}")
    if cmd == "render":
        rewrite_readme(os.path.join(ROOT, "README.md"), rest or ORDER)
        return 0
    run(build, rest or [n for n in ORDER if n != "test-time"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
