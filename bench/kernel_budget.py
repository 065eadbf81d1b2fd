#!/usr/bin/env python3
"""Per-kernel budget of one inference (issue 10 Deliver 3): every kernel fuserun launches
for ONE run of the model, with its GPU duration from Nsight Compute, grouped by kernel.

  python3 bench/kernel_budget.py --bin .gpu/bin MODEL.onnx [--csv OUT.csv] -- [fuserun args]

ncu serialises kernels and times each alone (`--clock-control none`: the clocks the
benchmarks run at), so the sum is the kernels' own time without launch gaps or overlap;
the replayed CUDA graph's device latency minus this sum is what launches and gaps cost.
Model loading launches kernels too (weight conversion, the GEMM autotune's trials), so
the script profiles fuserun twice, with 1 and with 2 timed runs and no warm-up, and keeps
the last (count(2) - count(1)) kernels: exactly one inference. The GEMM autotune result
is persisted by a plain run first ($FUSEOPT_GEMM_CACHE) so the profiled runs choose the
same algorithms without trying candidates.
"""
import argparse
import collections
import csv
import io
import os
import re
import subprocess
import sys


def ncu_kernels(ncu, fuserun, model, extra, iters, env):
    cmd = [ncu, "--target-processes", "all", "--clock-control", "none", "--metrics", "gpu__time_duration.sum",
           "--csv", "--page", "raw", "--print-units", "base",
           fuserun, model, "--no-cuda-graphs", "--warmup", "0", "--iters", str(iters), "-q"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"kernel_budget: ncu failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-800:]}")
    start = r.stdout.find('"ID"')
    if start < 0:  # say what ncu said instead of counting nothing
        tail = (r.stdout[-600:] + "\n" + r.stderr[-600:]).strip()
        sys.exit(f"kernel_budget: no CSV table in ncu's output; its last lines:\n{tail}")
    rows = list(csv.DictReader(io.StringIO(r.stdout[start:])))
    out = []
    for row in rows:
        try:
            # ns (--print-units base); ncu may group digits ("12,345")
            us = float(row["gpu__time_duration.sum"].replace(",", "")) / 1000.0
        except (KeyError, ValueError):
            continue  # the units row
        out.append((row.get("Kernel Name", "?"), us))
    return out


def short(name):
    name = re.sub(r"\(.*$", "", name)           # drop the argument list
    name = re.sub(r"^void\s+", "", name)
    name = name.replace("(anonymous namespace)", "").replace("<unnamed>", "")
    while re.search(r"<[^<>]*>", name):          # templates, innermost first
        name = re.sub(r"<[^<>]*>", "", name)
    return name.split("::")[-1][:70] or "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=".gpu/bin")
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--csv", default="")
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("model")
    ap.add_argument("extra", nargs="*", help="fuserun arguments after --, e.g. --precision fp16 --shape batch=1")
    a = ap.parse_args()
    fuserun = os.path.join(a.bin, "fuserun")
    env = dict(os.environ)
    env.setdefault("FUSEOPT_GEMM_CACHE", "/tmp/fuseopt-kernel-budget-gemm.json")
    subprocess.run([fuserun, a.model, "--warmup", "1", "--iters", "1", "-q"] + a.extra, env=env, check=True,
                   capture_output=True)
    one = ncu_kernels(a.ncu, fuserun, a.model, a.extra, 1, env)
    two = ncu_kernels(a.ncu, fuserun, a.model, a.extra, 2, env)
    k = len(two) - len(one)
    if k <= 0:
        sys.exit(f"kernel_budget: could not isolate one inference ({len(one)} vs {len(two)} kernels)")
    run = two[-k:]
    total = sum(us for _, us in run)
    groups = collections.OrderedDict()
    for name, us in run:
        g = groups.setdefault(short(name), [0, 0.0])
        g[0] += 1
        g[1] += us
    print(f"{os.path.basename(a.model)} {' '.join(a.extra)}: {k} kernels in one inference, "
          f"{total:.1f} us of kernel time")
    print(f"| kernel | launches | total us | us/launch | share |\n|---|---|---|---|---|")
    for name, (n, us) in sorted(groups.items(), key=lambda kv: -kv[1][1])[: a.top]:
        print(f"| {name} | {n} | {us:.1f} | {us / n:.2f} | {100 * us / total:.0f}% |")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["index", "kernel", "us"])
            for i, (name, us) in enumerate(run):
                w.writerow([i, name, f"{us:.3f}"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
