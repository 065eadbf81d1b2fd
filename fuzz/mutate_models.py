#!/usr/bin/env python3
"""Structural mutation fuzzer over the real exports in models/.

Each of --count mutated models (fuzz/model_mutations.py: typed mutations of dims,
attributes, dtypes, wiring, opsets, initializers, tensor data, plus byte damage)
is written to a temporary file and given to the tools of a sanitizer build
(-DFUSEOPT_SANITIZE=address,undefined, docs/testing.md):

  fuseopt IN OUT -q            every mutated model
  fuserun X --backend cpu -q   where the base model is small: X = OUT when fuseopt
                               accepted the model, else the mutated model itself

and each run is classified:

  crash       killed by a signal
  sanitizer   an ASan/UBSan/LSan report (exit 86, or the report on stderr)
  hang        still running after --timeout seconds
  rejected    a refusal: must be ONE stderr line "fuseopt: error: ..." naming the
              file (fuserun: naming the file, a node or an op of the model), and
              no output written; anything else is a bad-rejection
  accepted    exit 0: OUT must pass onnx.checker.check_model(full_check=True) and
              open in an ONNX Runtime session; else invalid-output, except:
  reference-unavailable  exit 0, OUT passes the checker, and ONNX Runtime refuses OUT
              and the mutated input alike for want of a kernel (NOT_IMPLEMENTED, the
              same op and version in both): the schema allows the model, the reference
              cannot run it (Pow-15 with a bfloat16 exponent, Mul-6). Not a failure.

crash, sanitizer, hang, bad-rejection and invalid-output are failures: each one's
model is kept in --keep with a line in its FINDINGS.txt, and the exit status is 1.
A mutation is reproduced by its index: --seed S --only I writes it and shows every
run's output.

  python3 fuzz/mutate_models.py --bin build-asan/bin --count 10000 --jobs 2
"""
import argparse
import collections
import multiprocessing
import os
import random
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

FAILURES = ("crash", "sanitizer", "hang", "bad-rejection", "invalid-output")
REFERENCE_UNAVAILABLE = "reference-unavailable"
# ONNX Runtime's two ways of saying it has no kernel for an op at a version.
NO_KERNEL = re.compile(r"NOT_IMPLEMENTED : (?:Failed to find kernel for|Could not find an implementation for) "
                       r"([A-Za-z_][A-Za-z0-9_.]*)\((\d+)\)")
SANITIZER_EXIT = 86
# Reports are fatal (exit 86); a huge allocation returns null (std::bad_alloc, as in a
# release build) instead of an ASan abort, and past 3 GiB it is refused.
SANITIZER_ENV = {
    "ASAN_OPTIONS": f"exitcode={SANITIZER_EXIT}:detect_leaks=1:allocator_may_return_null=1:"
                    "max_allocation_size_mb=3072:hard_rss_limit_mb=6144",
    "UBSAN_OPTIONS": f"exitcode={SANITIZER_EXIT}:print_stacktrace=1:halt_on_error=1",
    "LSAN_OPTIONS": f"exitcode={SANITIZER_EXIT}",
}
SANITIZER_TEXT = re.compile(r"(Address|Leak|UndefinedBehavior)Sanitizer|runtime error:")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--bin", required=True, help="bin folder of a sanitizer build (fuseopt, fuserun)")
    p.add_argument("--src", default=root, help="source tree (its models/ are the base models)")
    p.add_argument("--count", type=int, default=200, help="mutated models (default 200)")
    p.add_argument("--seed", type=int, default=1, help="mutation i is a function of (seed, i) alone")
    p.add_argument("--start", type=int, default=0, help="first mutation index (to continue a run)")
    p.add_argument("--only", type=int, help="run this one mutation index and print everything")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=float, default=120, help="seconds per tool run before it is a hang")
    p.add_argument("--max-kb", type=int, default=256, help="base models: model.onnx files up to this size")
    p.add_argument("--fuserun-max-kb", type=int, default=64, help="fuserun runs for base models up to this size")
    p.add_argument("--keep", default=os.path.join(tempfile.gettempdir(), "fuseopt-mutate-findings"),
                   help="folder for the models of failures and FINDINGS.txt")
    return p.parse_args()


def base_models(src, max_kb):
    """models/**/model.onnx up to max_kb, without external data, sorted: the same list
    everywhere the tree is the same."""
    import onnx
    out = []
    for root, _dirs, files in os.walk(os.path.join(src, "models")):
        for f in files:
            path = os.path.join(root, f)
            if not f.endswith(".onnx") or os.path.getsize(path) > max_kb * 1024:
                continue
            m = onnx.load(path, load_external_data=False)
            if any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
                continue
            out.append(os.path.relpath(path, src))
    return sorted(out)


# ---- one mutation (runs in a worker) ----------------------------------------------------------

_W = {}  # per worker: args, base models (parsed once), temp folder


def worker_init(args, bases, tmp):
    import onnx
    _W["args"] = args
    _W["bases"] = [(rel, onnx.load(os.path.join(args.src, rel)), os.path.getsize(os.path.join(args.src, rel)))
                   for rel in bases]
    _W["tmp"] = tempfile.mkdtemp(dir=tmp)
    _W["env"] = dict(os.environ, **SANITIZER_ENV)


def run_tool(cmd, timeout):
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout, env=_W["env"])
    except subprocess.TimeoutExpired:
        return None, "", time.monotonic() - t0
    return r.returncode, r.stderr.decode("utf-8", errors="replace"), time.monotonic() - t0


def classify(tool, rc, err, path, names):
    """(class, detail) of one tool run; names: what a fuserun message may name instead of
    the file (ModelNames)."""
    if rc is None:
        return "hang", "no exit within the timeout"
    if rc == SANITIZER_EXIT or SANITIZER_TEXT.search(err):
        line = next((x for x in err.splitlines() if SANITIZER_TEXT.search(x)), err.strip()[-300:])
        return "sanitizer", line.strip()
    if rc < 0:
        return "crash", f"signal {-rc}"
    if rc == 0:
        return "accepted", ""
    lines = [x for x in err.splitlines() if x.strip()]
    prefix = f"{tool}: error: "
    if len(lines) != 1 or not lines[0].startswith(prefix):
        return "bad-rejection", f"exit {rc}, {len(lines)} stderr lines: " + " | ".join(lines[:3])[:400]
    msg = lines[0][len(prefix):]
    named = path in msg or (tool == "fuserun" and ("node" in msg or any(f"'{n}'" in msg for n in names) or
                                                   any(re.search(rf"\b{re.escape(n)}\b", msg) for n in names.ops)))
    if not named:
        return "bad-rejection", f"does not name the file{'/node/op' if tool == 'fuserun' else ''}: {lines[0][:300]}"
    return "rejected", lines[0][:300]


def check_output(path):
    """None when the written model is valid ONNX that ONNX Runtime opens; else why not."""
    import onnx
    import onnxruntime as ort
    try:
        onnx.checker.check_model(path, full_check=True)
    except Exception as e:  # noqa: BLE001 (any refusal is the finding)
        return "onnx.checker: " + " ".join(str(e).split())[:300]
    try:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.log_severity_level = 4
        ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        return "onnxruntime: " + " ".join(str(e).split())[:300]
    return None


def no_kernel_op(why):
    """'Op(version)' when `why` (check_output's text) is ONNX Runtime refusing for want of a
    kernel, the checker having passed; else None."""
    if not why or not why.startswith("onnxruntime: "):
        return None
    m = NO_KERNEL.search(why)
    return f"{m.group(1)}({m.group(2)})" if m else None


def ort_refusal(path):
    """ONNX Runtime's refusal of the model at `path` (the checker not asked), or None."""
    import onnxruntime as ort
    try:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.log_severity_level = 4
        ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        return "onnxruntime: " + " ".join(str(e).split())[:300]
    return None


def reference_unavailable(why_out, why_in):
    """The detail of a reference-unavailable run, or None: OUT passed the checker and ONNX
    Runtime has no kernel for the same op and version in OUT and in the input."""
    op = no_kernel_op(why_out)
    if op is None or no_kernel_op(why_in) != op:
        return None
    return f"ONNX Runtime has no kernel for {op}, in the input as in the output: {why_out[:200]}"


class ModelNames(set):
    """What a fuserun message may name instead of the file: node, value and input names
    (quoted in messages), and op types (.ops, as words)."""
    ops = frozenset()


def model_names(data):
    import onnx
    names = ModelNames()
    try:
        m = onnx.ModelProto.FromString(data)
    except Exception:  # noqa: BLE001 (byte damage)
        return names
    g = m.graph
    names.update(n.name for n in g.node)
    names.update(o for n in g.node for o in n.output)
    names.update(x.name for x in list(g.input) + list(g.output) + list(g.initializer))
    names.discard("")
    names.ops = frozenset(n.op_type for n in g.node if n.op_type)
    return names


def one_mutation(i, verbose=False):
    from model_mutations import mutate
    args = _W["args"]
    rng = random.Random(f"{args.seed}:{i}")
    rel, base, size = _W["bases"][rng.randrange(len(_W["bases"]))]
    data, what, kind = mutate(base, rng)
    path = os.path.join(_W["tmp"], f"m{i}.onnx")
    out = os.path.join(_W["tmp"], f"m{i}.opt.onnx")
    with open(path, "wb") as f:
        f.write(data)
    rec = {"i": i, "model": rel, "kind": kind, "what": what, "runs": []}
    names = model_names(data)

    rc, err, secs = run_tool([os.path.join(args.bin, "fuseopt"), path, out, "-q"], args.timeout)
    cls, detail = classify("fuseopt", rc, err, path, names)
    if cls == "rejected" and os.path.exists(out):
        cls, detail = "invalid-output", "an output was written although fuseopt failed"
    elif cls == "accepted":
        why = check_output(out) if os.path.exists(out) else "exit 0 but no output file"
        unavailable = reference_unavailable(why, ort_refusal(path)) if no_kernel_op(why) else None
        if unavailable:
            cls, detail = REFERENCE_UNAVAILABLE, unavailable
        elif why:
            # For triage: writing an invalid model from a valid input is fuseopt's own bug;
            # from an invalid one, a check the loader lacks.
            cls, detail = "invalid-output", why + (" [the mutated input is valid ONNX]" if check_output(path) is None
                                                   else " [the mutated input is not valid ONNX either]")
    rec["runs"].append(("fuseopt", cls, detail, secs, err))

    if size <= args.fuserun_max_kb * 1024:
        target = out if cls in ("accepted", REFERENCE_UNAVAILABLE) else path
        rc, err, secs = run_tool([os.path.join(args.bin, "fuserun"), target, "--backend", "cpu", "--threads", "1",
                                  "-q"], args.timeout)
        if target == out:  # the optimized model's nodes (fused ones) are what its messages name
            with open(out, "rb") as f:
                names = model_names(f.read())
        fcls, fdetail = classify("fuserun", rc, err, target, names)
        rec["runs"].append(("fuserun(output)" if target == out else "fuserun(input)", fcls, fdetail, secs, err))

    if any(r[1] in FAILURES for r in rec["runs"]):
        os.makedirs(args.keep, exist_ok=True)
        keep = os.path.join(args.keep, f"s{args.seed}_m{i}_{kind}.onnx")
        with open(keep, "wb") as f:
            f.write(data)
        rec["kept"] = keep
    elif any(r[1] == REFERENCE_UNAVAILABLE for r in rec["runs"]):
        rec["noted"] = True
    if not verbose:
        rec["runs"] = [r[:4] for r in rec["runs"]]  # the stderr text only for --only
    for p in (path, out):
        if os.path.exists(p):
            os.remove(p)
    return rec


# ---- the run and its summary ------------------------------------------------------------------

def summarize(recs, bases, args, wall):
    tools = collections.OrderedDict()
    kinds = collections.defaultdict(collections.Counter)
    secs = collections.defaultdict(list)
    for r in recs:
        for tool, cls, _detail, s in (x[:4] for x in r["runs"]):
            tool = tool.split("(")[0]
            tools.setdefault(tool, collections.Counter())[cls] += 1
            secs[tool].append(s)
        worst = next((x[1] for x in r["runs"] if x[1] in FAILURES), r["runs"][0][1])
        kinds[r["kind"]][worst] += 1
    cols = ["accepted", "rejected", REFERENCE_UNAVAILABLE] + list(FAILURES)
    print(f"\n{len(recs)} mutated models (seed {args.seed}, indices {args.start}..{args.start + len(recs) - 1}) "
          f"of {len(bases)} base models, {wall:.0f} s with {args.jobs} jobs")
    head = f"{'':16}" + "".join(f"{c:>22}" for c in cols) + f"{'median s':>10}{'max s':>8}"
    print(head)
    for tool, c in tools.items():
        s = sorted(secs[tool])
        print(f"{tool:16}" + "".join(f"{c[k]:>22}" for k in cols) + f"{s[len(s) // 2]:>10.2f}{s[-1]:>8.1f}")
    print("\nper mutation kind (fuseopt's class, or the first failure of the runs)")
    print(f"{'':22}" + "".join(f"{c:>22}" for c in cols))
    for k in sorted(kinds):
        print(f"{k:22}" + "".join(f"{kinds[k][c]:>22}" for c in cols))
    noted = [r for r in recs if r.get("noted")]
    for r in noted:  # not failures: listed so that each can be looked at
        for tool, cls, detail, _s in (x[:4] for x in r["runs"]):
            if cls == REFERENCE_UNAVAILABLE:
                print(f"NOTE {cls}: {tool} on mutation {r['i']} of {r['model']} ({r['what']}): {detail}")
    failed = [r for r in recs if "kept" in r]
    if failed:
        os.makedirs(args.keep, exist_ok=True)
        with open(os.path.join(args.keep, "FINDINGS.txt"), "a") as f:
            for r in failed:
                for tool, cls, detail, _s in (x[:4] for x in r["runs"]):
                    if cls in FAILURES:
                        line = (f"{cls}: {tool} on {r['kept']} (mutation {r['i']} of {r['model']}: {r['what']}): "
                                f"{detail}")
                        print("FAIL " + line)
                        f.write(line + "\n")
    print(f"\nfailures: {len(failed)} of {len(recs)} mutated models" +
          (f" (models and FINDINGS.txt in {args.keep})" if failed else ""))
    return 1 if failed else 0


def main():
    args = parse_args()
    for tool in ("fuseopt", "fuserun"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            sys.exit(f"mutate_models: {os.path.join(args.bin, tool)} not built")
    bases = base_models(args.src, args.max_kb)
    if not bases:
        sys.exit(f"mutate_models: no base models under {args.src}/models")
    tmp = tempfile.TemporaryDirectory(prefix="fuseopt-mutate-")
    if args.only is not None:
        worker_init(args, bases, tmp.name)
        r = one_mutation(args.only, verbose=True)
        print(f"mutation {r['i']} of {r['model']} ({r['kind']}): {r['what']}")
        for tool, cls, detail, s, err in r["runs"]:
            print(f"--- {tool}: {cls} {detail} ({s:.1f} s)\n{err.rstrip()}")
        if "kept" in r:
            print(f"kept as {r['kept']}")
        return 1 if "kept" in r else 0
    t0 = time.monotonic()
    recs = []
    indices = range(args.start, args.start + args.count)
    with multiprocessing.get_context("fork").Pool(args.jobs, worker_init, (args, bases, tmp.name)) as pool:
        for r in pool.imap_unordered(one_mutation, indices, chunksize=1):
            recs.append(r)
            if len(recs) % 500 == 0:
                bad = sum(1 for x in recs if "kept" in x)
                print(f"mutate_models: {len(recs)}/{args.count} done, {bad} failures, "
                      f"{time.monotonic() - t0:.0f} s", flush=True)
    recs.sort(key=lambda r: r["i"])
    return summarize(recs, bases, args, time.monotonic() - t0)


if __name__ == "__main__":
    sys.exit(main())
