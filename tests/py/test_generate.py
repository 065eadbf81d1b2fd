#!/usr/bin/env python3
"""fuserun --generate: the decode loop against ONNX Runtime running the same loop.

For each KV-cache decoder of models/synthetic (GQA Llama-style, GPT-2 MHA, MQA), original and
fuseopt-optimized: `fuserun --past 3 --save-outputs` gives the seeded first-step inputs;
`fuserun --past 3 --generate 4 --save-outputs` runs four steps and saves the last step's
inputs (the cache it read: what the loop carried over three steps) and outputs. ONNX Runtime
runs the original model for four steps from the first inputs, feeding each step's presents
back as the next past and growing the mask by a column of ones, and must reach the same last
inputs and outputs (fp32 1e-4). Every loop runs with both KV cache modes: --kv-cache auto (the
fused model's cache held by the session, appended in place; the original's cannot be held and
the loop says why) and --kv-cache copy. Also: the printed cache lengths, a held single step
checked against the first step's saved outputs (fuserun --kv-cache hold --check: the plain
first run and the last held run), and the refusals (a model without a cache; --generate with
--check; --kv-cache hold on a model whose cache cannot be held).
Invoked by ctest as: test_generate.py --bin <build>/bin --src <repo>. FUSERUN_BACKEND=cuda runs the
fuserun half on the GPU (the carried cache then stays on the device between steps).
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

np, onnx, ort = lib.require("numpy", "onnx", "onnxruntime")
from onnx import numpy_helper  # noqa: E402

PAST, STEPS = 3, 4
MODELS = ["kv_llama_gqa", "kv_gpt2_mha", "kv_mqa"]
BACKEND = os.environ.get("FUSERUN_BACKEND", "cpu")


def read_dir(d, prefix):
    return [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(os.path.join(d, prefix + "_*.pb")),
                                                                         key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]


def ort_loop(model, first, steps):
    """The loop by hand: presents fed back as pasts, the mask one column longer per step."""
    s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    outs_meta = [o.name for o in s.get_outputs()]
    pasts = [n for n in names if "past" in n.lower()]
    presents = [i for i, n in enumerate(outs_meta) if "present" in n.lower()]
    feed = dict(zip(names, first))
    for step in range(steps):
        outs = s.run(None, feed)
        if step + 1 == steps:
            return [feed[n] for n in names], outs
        fresh = outs[presents[0]].shape[-2] - feed[pasts[0]].shape[-2]
        for p, i in zip(pasts, presents):
            feed[p] = outs[i]
        for n in names:
            if "mask" in n.lower() and feed[n].ndim == 2:
                m = feed[n]
                feed[n] = np.concatenate([m, np.ones((m.shape[0], fresh), m.dtype)], axis=1)
            elif n in ("position_ids", "cache_position"):
                feed[n] = feed[n] + fresh


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def main():
    args = lib.parse_args()
    fuserun, fuseopt = os.path.join(args.bin, "fuserun"), os.path.join(args.bin, "fuseopt")
    failures = []
    expect = lib.expecter(failures)
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            if args.k and args.k not in name:
                continue
            orig = os.path.join(args.src, "models", "synthetic", name, "model.onnx")
            fused = os.path.join(tmp, name + "_fused.onnx")
            r = subprocess.run([fuseopt, orig, fused, "-q"], capture_output=True, text=True)
            expect(r.returncode == 0, f"{name}: fuseopt exits 0 {r.stderr[-300:]}")
            for tag, model in (("original", orig), ("fused", fused)):
                d0, d1 = os.path.join(tmp, name + tag + "0"), os.path.join(tmp, name + tag + "1")
                base = [fuserun, model, "--backend", BACKEND, "--past", str(PAST)]
                r0 = subprocess.run(base + ["--warmup", "0", "--iters", "0", "--save-outputs", d0, "-q"],
                                    capture_output=True, text=True)
                if not expect(r0.returncode == 0, f"{name} {tag}: fuserun runs ({r0.stderr[-300:]})"):
                    continue
                want_in, want_out = ort_loop(orig, read_dir(d0, "input"), STEPS)
                for kv in ("auto", "copy"):
                    label = f"{name} {tag} --kv-cache {kv}"
                    shutil.rmtree(d1, ignore_errors=True)
                    r1 = subprocess.run(base + ["--generate", str(STEPS), "--save-outputs", d1, "--kv-cache", kv],
                                        capture_output=True, text=True)
                    if not expect(r1.returncode == 0, f"{label}: fuserun --generate runs ({r1.stderr[-300:]})"):
                        continue
                    expect(f"generate: {STEPS} steps, cache {PAST} -> {PAST + STEPS - 1} positions" in r1.stdout,
                           f"{label}: the loop reports its cache lengths")
                    held = kv == "auto" and tag == "fused"
                    expect(("kv cache: held by the session" in r1.stdout) == held,
                           f"{label}: the cache is {'held' if held else 'copied'} ({r1.stdout[-300:]})")
                    if kv == "auto" and tag == "original":
                        expect("not held" in r1.stdout and "no fused attention" in r1.stdout,
                               f"{label}: says why the cache is not held")
                    got_in, got_out = read_dir(d1, "input"), read_dir(d1, "output")
                    ok = len(got_in) == len(want_in) and len(got_out) == len(want_out)
                    ok = ok and all(g.shape == w.shape and rel(g, w) <= 1e-4 for g, w in zip(got_in, want_in))
                    expect(ok, f"{label}: the last step's inputs (the carried cache, the grown mask) match ONNX Runtime's loop")
                    ok = all(g.shape == w.shape and rel(g, w) <= 1e-4 for g, w in zip(got_out, want_out))
                    expect(ok, f"{label}: the last step's outputs match ({[rel(g, w) for g, w in zip(got_out, want_out)]})")
                # One step timed with the cache held (rewound before each run), checked against the
                # plain run's saved outputs: the first run and the last held run both compared.
                r2 = subprocess.run([fuserun, model, "--backend", BACKEND, "--check", d0, "--kv-cache", "hold",
                                     "--warmup", "1", "--iters", "3"], capture_output=True, text=True)
                if tag == "fused":
                    expect(r2.returncode == 0 and "check: PASS" in r2.stdout and "kv cache: held" in r2.stdout,
                           f"{name} fused: a held step passes --check ({r2.stdout[-400:]}{r2.stderr[-300:]})")
                else:
                    expect(r2.returncode == 2 and "--kv-cache hold" in r2.stderr and "no fused attention" in r2.stderr,
                           f"{name} original: --kv-cache hold is refused with the reason ({r2.stderr[-300:]})")
        # Refusals: a model without a cache; --generate with --check.
        plain = os.path.join(args.src, "models", "synthetic", "attn_gqa", "model.onnx")
        r = subprocess.run([fuserun, plain, "--backend", "cpu", "--generate", "2"], capture_output=True, text=True)
        expect(r.returncode == 2 and "no cache input" in r.stderr, "a model without a cache is refused by name")
        r = subprocess.run([fuserun, orig, "--backend", "cpu", "--generate", "2", "--check", tmp], capture_output=True,
                           text=True)
        expect(r.returncode == 2 and "--generate" in r.stderr, "--generate with --check is refused")
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
