"""The synthetic models in models/synthetic (written by models/make_synthetic.py):

1. Regenerating them into a temporary folder gives identical bytes (models,
   external-data side files, test inputs and outputs; reference outputs that
   differ in bytes must still agree to 1e-6, since ONNX Runtime's kernels may
   pick another SIMD path on another CPU, and that is reported).
2. Per model, with every test_data_set_N:
   - round trip: `fuseopt --passes none` and `--passes cleanup` give models that
     ONNX Runtime runs to the reference within 1e-5 (fp16: 1e-3);
   - full pipeline: the optimized model passes onnx.checker (full_check), ONNX
     Runtime reproduces the reference (1e-4; fp16 1e-2), and so does
     `fuserun --backend cpu --check` on the original and on the optimized model
     (where the CPU backend lacks a kernel, e.g. float16 or If, the test
     accepts exactly that "no cpu kernel" error and says so);
   - determinism: optimizing twice writes identical bytes (side files included);
   - what must fuse fuses (EXPECT_OPS), and for the negative-legality models
     the fusion does NOT fire and the JSON report names the rule (NEGATIVE);
   - external data stays external: OUT.onnx.data next to the output with a
     relative location;
   - the If model keeps the outer values read only by its branches."""
import filecmp
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

# Fused-op counts that must hold after the default pipeline.
EXPECT_OPS = {
    "attn_sdpa_sqrt_scale": {"fuseopt.Attention": 1, "Softmax": 0, "Sqrt": 0},
    "attn_masked_row": {"fuseopt.Attention": 1, "Softmax": 0, "Where": 0},
    "attn_gqa": {"fuseopt.Attention": 1, "Softmax": 0, "Expand": 0},
    "attn_causal_trilu": {"fuseopt.Attention": 1, "Softmax": 0},
    "attn_t5_bias": {"fuseopt.Attention": 1, "Softmax": 0},
    # Both post-LN residual norms: the GEMM before each SkipLayerNorm takes it (FusedMatMulLayerNorm with skip).
    "bert_block_fp16": {"fuseopt.Attention": 1, "fuseopt.FusedMatMulLayerNorm": 2, "fuseopt.SkipLayerNorm": 0,
                        "Softmax": 0},
    "external_data_mlp": {"fuseopt.FusedMatMul": 2, "MatMul": 0},
    # The outer values read only inside the branches survive DCE.
    "if_outer_scope": {"If": 1, "Mul": 1, "Sigmoid": 1, "ReduceSum": 1},
}
# model -> (pattern that must not fire, fused op it would make, rule the report names)
NEGATIVE = {
    "neg_bias_non_last_axis": ("FusedMatMul", "fuseopt.FusedMatMul", "rule 3"),
    "neg_nonconst_weight": ("FusedMatMul", "fuseopt.FusedMatMul", "rule 2"),
    "neg_interior_used_twice": ("AddRelu", "fuseopt.AddRelu", "rule 1"),
    "neg_cast_precision": ("RMSNorm", "fuseopt.RMSNorm", "rule 5"),
    "neg_layernorm_axis": ("LayerNorm", "LayerNormalization", "rule 6"),
}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def tensor(path):
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    t.ParseFromString(read(path))
    return numpy_helper.to_array(t)


def data_sets(model_dir):
    """[(folder, inputs, outputs)] for every test_data_set_N."""
    out = []
    for d in sorted(glob.glob(os.path.join(model_dir, "test_data_set_*"))):
        ins = [tensor(p) for p in lib.data_files(d, "input")]
        outs = [tensor(p) for p in lib.data_files(d, "output")]
        out.append((d, ins, outs))
    return out


def check_regeneration(src, tmp, failures):
    import numpy as np
    regen = os.path.join(tmp, "regen")
    r = subprocess.run([sys.executable, os.path.join(src, "models", "make_synthetic.py"), "--out", regen],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        failures.append(f"make_synthetic.py failed: {r.stderr.strip()[-500:]}")
        return
    committed = os.path.join(src, "models", "synthetic")

    def files(root):
        return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)

    want, got = files(committed), files(regen)
    if want != got:
        failures.append(f"regenerated file list differs: only committed {sorted(set(want) - set(got))}, "
                        f"only regenerated {sorted(set(got) - set(want))}")
    same = 0
    for rel in sorted(set(want) & set(got)):
        a, b = os.path.join(committed, rel), os.path.join(regen, rel)
        if filecmp.cmp(a, b, shallow=False):
            same += 1
            continue
        if os.path.basename(rel).startswith("output_"):
            x, y = tensor(a), tensor(b)
            if x.shape == y.shape and x.dtype == y.dtype and np.allclose(x.astype(np.float64), y.astype(np.float64),
                                                                         rtol=1e-6, atol=1e-6):
                print(f"note {rel}: reference output bytes differ but agree to 1e-6 (ONNX Runtime kernels)")
                continue
        failures.append(f"{rel}: regenerated bytes differ from the committed file")
    print(f"{'ok  ' if same == len(want) else 'note'} regeneration: {same} of {len(want)} files byte-identical")


def check_model(args, model_dir, tmp, failures):
    import numpy as np
    import onnx
    name = os.path.basename(model_dir)
    src = os.path.join(model_dir, "model.onnx")
    sets = data_sets(model_dir)
    fp16 = any(o.dtype == np.float16 for _, _, outs in sets for o in outs)
    fails = []

    def compare_all(got_sets, atol, what):
        for (d, _, refs), got in zip(sets, got_sets):
            if len(got) != len(refs):
                fails.append(f"{name} {what}: {len(got)} outputs, reference has {len(refs)}")
                continue
            for i, (g, w) in enumerate(zip(got, refs)):
                p = lib.compare(np.asarray(g), w, atol, atol)
                if p:
                    fails.append(f"{name} {what} {os.path.basename(d)} output {i}: {p}")

    # Round trip (issue 2): no passes, then cleanup only.
    for mode in ("none", "cleanup"):
        out = os.path.join(tmp, f"{name}.{mode}.onnx")
        r = lib.run_fuseopt(args.bin, src, out, "-q", "--passes", mode)
        if r.returncode != 0:
            fails.append(f"{name} [{mode}]: fuseopt exit {r.returncode}: {r.stderr.strip()}")
            continue
        compare_all([lib.run_ort(out, ins) for _, ins, _ in sets], 1e-3 if fp16 else 1e-5, f"[{mode}] ORT")

    # Full pipeline, twice (determinism), with the JSON report.
    outs = []
    for run in ("a", "b"):
        out_dir = os.path.join(tmp, f"{name}.{run}")
        os.makedirs(out_dir)
        out = os.path.join(out_dir, "opt.onnx")
        rep = os.path.join(out_dir, "report.json")
        r = lib.run_fuseopt(args.bin, src, out, "-q", "--report", rep)
        if r.returncode != 0:
            fails.append(f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()}")
            failures.extend(fails)
            return
        outs.append((out, rep))
    (out, rep), (out_b, _) = outs
    for suffix in ("", ".data"):
        if os.path.exists(out + suffix) != os.path.exists(out_b + suffix) or \
                (os.path.exists(out + suffix) and read(out + suffix) != read(out_b + suffix)):
            fails.append(f"{name}: two runs wrote different opt.onnx{suffix}")
    report = json.load(open(rep))
    try:
        onnx.checker.check_model(out, full_check=True)
    except Exception as e:  # noqa: BLE001 - any checker complaint is a failure
        fails.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
    compare_all([lib.run_ort(out, ins) for _, ins, _ in sets], 1e-2 if fp16 else 1e-4, "[optimized] ORT")

    ops = report["ops_after"]
    for op, n in EXPECT_OPS.get(name, {}).items():
        if ops.get(op, 0) != n:
            fails.append(f"{name}: {ops.get(op, 0)} {op} after optimization, expected {n} (ops {ops})")
    if name in NEGATIVE:
        pattern, fused_op, rule = NEGATIVE[name]
        stats = next((p for p in report["patterns"] if p["name"] == pattern), None)
        if ops.get(fused_op, 0) or (stats and stats["matched"]):
            fails.append(f"{name}: {pattern} fired ({ops})")
        if not stats or not any(rule + ":" in reason for reason in stats["reasons"]):
            fails.append(f"{name}: the report gives no '{rule}' rejection for {pattern}: "
                         f"{stats['reasons'] if stats else 'pattern missing'}")
        elif ops.get(fused_op, 0) == 0:
            print(f"     {name}: {pattern} rejected: {stats['reasons'][0]}")

    if name == "external_data_mlp":
        m = onnx.load(out, load_external_data=False)
        locs = {e.value for t in m.graph.initializer for e in t.external_data if e.key == "location"}
        if locs != {"opt.onnx.data"} or not os.path.exists(out + ".data"):
            fails.append(f"{name}: weights not in the side file opt.onnx.data next to the output (locations {locs})")

    # fuseopt's own CPU runtime on the original and the optimized model.
    for label, path in (("original", src), ("optimized", out)):
        for d, _, _ in sets:
            cmd = [os.path.join(args.bin, "fuserun"), path, "--backend", "cpu", "--check", d, "-q"]
            if fp16:
                cmd += ["--rtol", "1e-2"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if r.returncode == 2 and "no cpu kernel" in r.stderr:
                print(f"note {name} [{label}]: CPU backend gap, not checked: {r.stderr.strip().splitlines()[-1]}")
                break
            if r.returncode != 0:
                fails.append(f"{name} [{label}] fuserun --check {os.path.basename(d)}: exit {r.returncode}: "
                             f"{(r.stdout + r.stderr).strip().splitlines()[-3:]}")
    print(f"{'FAIL' if fails else 'ok  '} {name}: nodes {report['nodes_before']} -> {report['nodes_after']}, "
          f"fused {{{', '.join(f'{k}: {v}' for k, v in sorted(ops.items()) if k.startswith('fuseopt.'))}}}")
    failures.extend(fails)


def main():
    args = lib.parse_args()
    lib.require("numpy", "onnx", "onnxruntime")
    root = os.path.join(args.src, "models", "synthetic")
    dirs = sorted(d for d in glob.glob(os.path.join(root, "*")) if os.path.isfile(os.path.join(d, "model.onnx")))
    if not dirs:
        print("FAIL: no models under models/synthetic (run models/make_synthetic.py)")
        return 1
    failures = []
    missing = sorted((set(EXPECT_OPS) | set(NEGATIVE)) - {os.path.basename(d) for d in dirs})
    if missing:
        failures.append(f"models missing from models/synthetic: {missing}")
    with tempfile.TemporaryDirectory() as tmp:
        check_regeneration(args.src, tmp, failures)
        for d in dirs:
            if args.k in os.path.basename(d):
                check_model(args, d, tmp, failures)
    for f in failures:
        print("FAIL " + f)
    print(f"{len(dirs)} synthetic models, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
