"""Half-precision models end to end: exported transformer models converted to
float16 (what `model.half()` before `torch.onnx.export` gives).

Per model in MODELS:
1. A small numpy converter (below) makes the float16 model: float initializers
   and Constant / ConstantOfShape tensors become float16 (finite values
   clipped to fp16's range, as finfo(float16).min mask fills are), float graph
   inputs, outputs and value_info become FLOAT16, Cast(to=FLOAT) becomes
   Cast(to=FLOAT16); integer parts are kept.
2. ONNX Runtime on the converted original gives the reference (float inputs of
   test_data_set_0 converted to float16); it must be finite and near the fp32
   reference (5e-2 norm-wise: a sanity check of the converter).
3. `fuseopt` on the fp16 model fuses as much as on the fp32 model: the same
   counts of fuseopt.Attention, FusedMatMul, GatedMatMul, LayerNormLinear, SkipLayerNorm,
   and no absorbed primitive (Erf, Tanh, Softmax, ReduceMean, ...) left over in fp16 only.
4. ONNX Runtime on the optimized fp16 model is within 1e-2 (norm-wise
   ||out - ref|| / ||ref||) of the reference.
5. `fuserun --backend cpu --check` passes on the fp16 original and the
   optimized model at its DEFAULT tolerance (1e-2 for a half model): the CPU
   backend computes half models in fp32.
Where ONNX Runtime has no float16 CPU kernel for an op, the model is skipped
with the op named."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

MODELS = ["bert_op17_ts", "bert_op18_dynamo", "gpt2_op17_ts", "llama_op18_dynamo", "vit_op18_dynamo",
          "t5enc_op17_ts"]
FUSED = ["fuseopt.Attention", "fuseopt.FusedMatMul", "fuseopt.GatedMatMul", "fuseopt.LayerNormLinear",
         "fuseopt.SkipLayerNorm"]
FP16_MAX = 65504.0


def to_fp16_array(a):
    import numpy as np
    a = a.astype(np.float64)
    finite = np.isfinite(a)
    a = np.where(finite, np.clip(a, -FP16_MAX, FP16_MAX), a)
    return a.astype(np.float16)


def convert_tensor(t):
    """A float TensorProto as float16 (same name); other dtypes unchanged."""
    from onnx import TensorProto, numpy_helper
    if t.data_type != TensorProto.FLOAT:
        return t
    return numpy_helper.from_array(to_fp16_array(numpy_helper.to_array(t)), t.name)


def convert_value_info(vi):
    from onnx import TensorProto
    tt = vi.type.tensor_type
    if vi.type.HasField("tensor_type") and tt.elem_type == TensorProto.FLOAT:
        tt.elem_type = TensorProto.FLOAT16


def convert_graph(g):
    import numpy as np
    from onnx import AttributeProto, TensorProto, helper, numpy_helper
    for i, t in enumerate(g.initializer):
        g.initializer[i].CopyFrom(convert_tensor(t))
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        convert_value_info(vi)
    for n in g.node:
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                convert_graph(a.g)
            elif a.type == AttributeProto.GRAPHS:
                for sg in a.graphs:
                    convert_graph(sg)
        if n.op_type in ("Cast", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                         "EyeLike"):
            for a in n.attribute:
                if a.name in ("to", "dtype") and a.i == TensorProto.FLOAT:
                    a.i = TensorProto.FLOAT16
        if n.op_type in ("Constant", "ConstantOfShape"):
            for a in list(n.attribute):
                if a.name == "value" and a.t.data_type == TensorProto.FLOAT:
                    a.t.CopyFrom(convert_tensor(a.t))
                elif a.name in ("value_float", "value_floats"):
                    v = np.array(a.f if a.name == "value_float" else list(a.floats), dtype=np.float32)
                    n.attribute.remove(a)
                    n.attribute.append(helper.make_attribute("value", numpy_helper.from_array(to_fp16_array(v))))


def convert_model(src, dst):
    import onnx
    m = onnx.load(src)
    convert_graph(m.graph)
    for f in m.functions:
        for n in f.node:
            if n.op_type == "Cast":
                for a in n.attribute:
                    if a.name == "to" and a.i == onnx.TensorProto.FLOAT:
                        a.i = onnx.TensorProto.FLOAT16
    onnx.save(m, dst)


def write_check_dir(d, inputs, outputs):
    from onnx import numpy_helper
    os.makedirs(d, exist_ok=True)
    for prefix, arrays in (("input", inputs), ("output", outputs)):
        for i, a in enumerate(arrays):
            with open(os.path.join(d, f"{prefix}_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a).SerializeToString())


def rel_err(got, want):
    import numpy as np
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    if g.shape != w.shape:
        return float("inf")
    if not np.isfinite(g).all():
        return float("nan")
    return float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))


def optimize(bin_dir, src, out, rep):
    """fuseopt's op counts after optimization, or (None, error lines)."""
    r = lib.run_fuseopt(bin_dir, src, out, "-q", "--report", rep)
    if r.returncode != 0:
        return None, (r.stdout + r.stderr).strip().splitlines()[-1:]
    with open(rep) as f:
        return json.load(f)["ops_after"], None


def ort_missing_kernel(err):
    """The op named by ONNX Runtime's 'no kernel' error, else None."""
    text = str(err)
    for marker in ("Could not find an implementation for ", "NOT_IMPLEMENTED : "):
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    return None


def check_model(args, name, tmp, failures, skipped):
    import numpy as np
    src_dir = os.path.join(args.src, "models", "exported", name)
    if not os.path.isfile(os.path.join(src_dir, "model.onnx")):
        failures.append(f"{name}: models/exported/{name}/model.onnx is missing")
        return
    work = os.path.join(tmp, name)
    os.makedirs(work)
    fp32_model = os.path.join(src_dir, "model.onnx")
    half = os.path.join(work, "model_fp16.onnx")
    convert_model(fp32_model, half)
    inputs32, refs32 = lib.load_test_data(src_dir)
    inputs = [to_fp16_array(x) if x.dtype == np.float32 else x for x in inputs32]

    try:
        refs = lib.run_ort(half, inputs)
    except Exception as e:  # noqa: BLE001 (ORT raises its own exception types)
        op = ort_missing_kernel(e)
        if op is None:
            failures.append(f"{name}: ONNX Runtime cannot run the fp16 model: {str(e).splitlines()[0]}")
        else:
            skipped.append(f"{name}: ONNX Runtime has no float16 CPU kernel: {op}")
            print(f"SKIP {name}: ONNX Runtime has no float16 CPU kernel: {op}")
        return
    fails = []
    for i, (r, r32) in enumerate(zip(refs, refs32)):
        if r.dtype.kind == "f" and r.dtype != np.float16:
            fails.append(f"output {i} of the converted model is {r.dtype}, not float16")
        e = rel_err(r, r32)
        if not e <= 5e-2:
            fails.append(f"output {i}: the fp16 reference is {e:.3g} from the fp32 one (converter broken?)")

    ref_err = max(rel_err(r, r32) for r, r32 in zip(refs, refs32))
    ops32, err32 = optimize(args.bin, fp32_model, os.path.join(work, "opt32.onnx"), os.path.join(work, "r32.json"))
    opt = os.path.join(work, "opt_fp16.onnx")
    ops16, err16 = optimize(args.bin, half, opt, os.path.join(work, "r16.json"))
    counts16 = counts32 = None
    opt_err = float("nan")
    if err32 or err16:
        fails.append(f"fuseopt failed: fp32 {err32}, fp16 {err16}")
    else:
        counts32 = {k: ops32.get(k, 0) for k in FUSED}
        counts16 = {k: ops16.get(k, 0) for k in FUSED}
        if counts16 != counts32:
            fails.append(f"fused ops differ: fp16 {counts16}, fp32 {counts32}")
        # Primitives a fusion absorbs (erf/tanh GELU, softmax, norms) are not left over in fp16 only.
        for op in ("Erf", "Tanh", "Softmax", "ReduceMean", "Sqrt", "Pow", "LayerNormalization"):
            if ops16.get(op, 0) > ops32.get(op, 0):
                fails.append(f"{ops16[op]} {op} left in the fp16 model, {ops32.get(op, 0)} in the fp32 one")
        try:
            got = lib.run_ort(opt, inputs)
            opt_err = max(rel_err(g, r) for g, r in zip(got, refs))
            for i, (g, r) in enumerate(zip(got, refs)):
                e = rel_err(g, r)
                if g.dtype != r.dtype or not e <= 1e-2:
                    fails.append(f"ORT on the optimized model, output {i}: {g.dtype} rel err {e:.3g} (tolerance 1e-2)")
        except Exception as e:  # noqa: BLE001
            fails.append(f"ORT cannot run the optimized fp16 model: {str(e).splitlines()[0]}")

    check = os.path.join(work, "test_data_set_0")
    write_check_dir(check, inputs, refs)
    run_errs = []
    for label, path in (("original", half), ("optimized", opt)):
        if not os.path.exists(path):
            continue
        cmd = [os.path.join(args.bin, "fuserun"), path, "--backend", "cpu", "--check", check]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        errs = [ln.split("rel err ")[1] for ln in r.stdout.splitlines() if "rel err " in ln]
        run_errs.append(f"{label} {','.join(errs)}")
        # The default tolerance for a half model is 1e-2 (no --rtol given).
        if r.returncode != 0 or "rtol 0.01" not in r.stdout:
            fails.append(f"fuserun --backend cpu --check [{label}]: exit {r.returncode}: "
                         f"{(r.stdout + r.stderr).strip().splitlines()[-4:]}")
    print(f"{'FAIL' if fails else 'ok  '} {name}: fused {counts16} (fp32 {counts32}); rel err: fp16 ref vs fp32 "
          f"{ref_err:.2g}, ORT optimized {opt_err:.2g}, fuserun cpu {'; '.join(run_errs)}")
    for f in fails:
        print(f"     {f}")
    failures.extend(f"{name}: {f}" for f in fails)


def main():
    args = lib.parse_args()
    lib.require("numpy", "onnx", "onnxruntime")
    failures, skipped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            if args.k in name:
                check_model(args, name, tmp, failures, skipped)
    if skipped:
        print(f"{len(skipped)} model(s) skipped: " + "; ".join(skipped))
    if failures:
        print(f"FAIL: {len(failures)} problem(s)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
