"""Memory-mapped weights and spilled constants do not change fuseopt's output (issue 13,
big models), checked through the CLI:
- the model folders (models/real, synthetic, incoming, exported/*_op18_dynamo; every one with
  FUSEOPT_MAPPED_ALL=1): optimized from memory
  (the inline model, nothing spilled) and optimized from an external-data copy of itself
  with every external tensor memory-mapped (FUSEOPT_MAP_MIN_BYTES=0) and every new
  constant spilled to the scratch file (FUSEOPT_SPILL_MIN_BYTES=0), both with
  --external-data: the two outputs, model and side file, are byte-identical; the folder
  holds nothing else afterwards (the scratch file is never visible);
- the generator of the big test models (models/make_big_model.py --preset tiny): its graph
  is the dynamo Llama form the fusions recognise (RMSNorm/SkipLayerNorm, RotaryEmbedding,
  Attention with GQA, GatedMatMul, QKV packing), the optimized model reproduces the
  original on random inputs (fuseopt --check), the same seed writes the same bytes;
- fuserun --save-outputs writes a folder that fuserun --check accepts for another model
  (the original's outputs as the optimized model's reference), and a wrong reference fails.
The >= 14 GB model itself: tests/py/test_big_model.py (opt-in, FUSEOPT_BIG_TESTS=1)."""
import glob
import hashlib
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    args = lib.parse_args()
    lib.require("numpy", "onnx")
    failures = []
    expect = lib.expecter(failures, quiet_ok=True)

    base_env = dict(os.environ)
    memory_env = dict(base_env, FUSEOPT_SPILL_MIN_BYTES=str(1 << 62))
    mapped_env = dict(base_env, FUSEOPT_MAP_MIN_BYTES="0", FUSEOPT_SPILL_MIN_BYTES="0")
    fuseopt = os.path.join(args.bin, "fuseopt")

    def run(env, *a):
        return subprocess.run([fuseopt, *a, "-q"], capture_output=True, text=True, env=env, timeout=600)

    # Every folder with FUSEOPT_MAPPED_ALL=1 (186 today, ~3 min); by default the bundled,
    # synthetic and incoming ones and the dynamo exports (~100, every architecture).
    every = os.environ.get("FUSEOPT_MAPPED_ALL") == "1"
    models = sorted(p for d in ("real", "exported", "synthetic", "incoming")
                    for p in glob.glob(os.path.join(args.src, "models", d, "*", "model.onnx"))
                    if args.k in p and (every or d != "exported" or "op18_dynamo" in p))
    compared = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, src in enumerate(models):
            name = os.path.basename(os.path.dirname(src))
            work = os.path.join(tmp, str(i))
            for sub in ("ext", "a", "b"):
                os.makedirs(os.path.join(work, sub))
            ext = os.path.join(work, "ext", "model.onnx")
            r = run(memory_env, src, ext, "--passes", "none", "--external-data")
            if r.returncode != 0:  # a model fuseopt refuses is other tests' business
                continue
            a, b = os.path.join(work, "a", "out.onnx"), os.path.join(work, "b", "out.onnx")
            ra = run(memory_env, src, a, "--external-data")
            rb = run(mapped_env, ext, b, "--external-data")
            if not expect(ra.returncode == rb.returncode, f"{name}: exit {ra.returncode} from memory, "
                          f"{rb.returncode} mapped ({ra.stderr.strip()} | {rb.stderr.strip()})"):
                continue
            if ra.returncode != 0:
                continue
            same = digest(a) == digest(b) and digest(a + ".data") == digest(b + ".data")
            expect(same, f"{name}: the output from mapped weights and spilled constants differs from the "
                         f"output from memory")
            expect(sorted(os.listdir(os.path.dirname(b))) == ["out.onnx", "out.onnx.data"],
                   f"{name}: the output folder holds other files: {os.listdir(os.path.dirname(b))}")
            compared += 1
        print(f"ok   {compared} models: output from mapped weights + spilled constants == output from memory")
        expect(compared >= (150 if every else 80), f"only {compared} models compared")

        # The big-model generator at its tiny preset.
        gen = os.path.join(args.src, "models", "make_big_model.py")
        tiny = [os.path.join(tmp, "tiny1"), os.path.join(tmp, "tiny2")]
        for d in tiny:
            r = subprocess.run([sys.executable, gen, d, "--preset", "tiny", "--seed", "3"],
                               capture_output=True, text=True)
            expect(r.returncode == 0, f"make_big_model.py --preset tiny: {r.stderr.strip()}")
        expect(all(digest(os.path.join(tiny[0], f)) == digest(os.path.join(tiny[1], f))
                   for f in ("model.onnx", "model.onnx.data")), "make_big_model.py: same seed, same bytes")
        import onnx
        onnx.checker.check_model(os.path.join(tiny[0], "model.onnx"), full_check=True)
        out = os.path.join(tmp, "tiny_out.onnx")
        report = os.path.join(tmp, "tiny_report.json")
        r = run(base_env, os.path.join(tiny[0], "model.onnx"), out, "--check", "--report", report)
        expect(r.returncode == 0, f"fuseopt --check on the tiny generated model: {r.stderr.strip()}")
        if r.returncode == 0:
            import json
            rep = json.load(open(report))
            matched = {p["name"]: p["matched"] for p in rep["patterns"]}
            after = rep["ops_after"]
            want = {"Attention": 2, "RotaryEmbedding": 4, "GatedMatMul": 2, "QkvPack": 2, "RMSNorm": 5}
            for k, n in want.items():
                expect(matched.get(k, 0) == n, f"tiny generated model: {k} matched {matched.get(k, 0)}, want {n}")
            expect(after.get("Softmax", 0) == 0 and after.get("Pow", 0) == 0 and after.get("Sigmoid", 0) == 0,
                   f"tiny generated model: unfused ops left: {after}")
            print(f"ok   generated tiny Llama: {matched}")

            # fuserun --save-outputs from the original, --check of the optimized against it.
            ref = os.path.join(tmp, "ref")
            fuserun = os.path.join(args.bin, "fuserun")
            r = subprocess.run([fuserun, os.path.join(tiny[0], "model.onnx"), "--backend", "cpu", "--shape",
                                "input_ids=2x7", "--save-outputs", ref, "--iters", "0", "--warmup", "0", "-q"],
                               capture_output=True, text=True)
            expect(r.returncode == 0 and sorted(os.listdir(ref)) == ["input_0.pb", "input_1.pb", "output_0.pb"],
                   f"fuserun --save-outputs: {r.returncode} {r.stderr.strip()} {os.listdir(ref) if os.path.isdir(ref) else ''}")
            r = subprocess.run([fuserun, out, "--backend", "cpu", "--check", ref], capture_output=True, text=True)
            expect(r.returncode == 0 and "check: PASS" in r.stdout,
                   f"fuserun --check against the original's saved outputs: {r.stdout[-400:]} {r.stderr.strip()}")
            # A reference from other inputs (another seed) must fail: the check compares for real.
            other = os.path.join(tmp, "other")
            subprocess.run([fuserun, os.path.join(tiny[0], "model.onnx"), "--backend", "cpu", "--shape",
                            "input_ids=2x7", "--seed", "5", "--save-outputs", other, "--iters", "0", "--warmup", "0",
                            "-q"], capture_output=True, text=True)
            import shutil
            for f in ("input_0.pb", "input_1.pb"):
                shutil.copy(os.path.join(ref, f), os.path.join(other, f))
            r = subprocess.run([fuserun, out, "--backend", "cpu", "--check", other], capture_output=True, text=True)
            expect(r.returncode == 1 and "check: FAIL" in r.stdout,
                   f"fuserun --check against another run's outputs fails: {r.returncode} {r.stdout[-300:]}")
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
