"""Inferred shapes vs what ONNX Runtime actually produces, for every node output
of every model in models/ (real and exported), on its test_data_set_0.

fuseopt's shapes come from test_unit's hidden "[.shape_tsv]" case (symbolic:
batch, seq, seq*4, ...); the symbols are bound by matching the model's declared
input dims against the actual input arrays, then every inferred dim must
evaluate to the size ONNX Runtime produced, and every dtype must match."""
import os
import re
import subprocess
import sys

import _fuseopt_testlib as lib

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:]*$")


def inferred_shapes(bin_dir, model):
    env = dict(os.environ, FUSEOPT_DUMP_MODEL=model)
    r = subprocess.run([os.path.join(bin_dir, "test_unit"), "[.shape_tsv]"], capture_output=True, text=True,
                       env=env, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"test_unit failed on {model}: {r.stdout[-2000:]} {r.stderr[-2000:]}")
    out = {}
    for line in r.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 4 and parts[0] == "SHAPE":
            dims = None if parts[3] == "-" else ([] if parts[3] == "" else parts[3].split(","))
            out[parts[1]] = (int(parts[2]), dims)
    return out


def eval_dim(text, bindings):
    """Size of one dim string, or None when it cannot be evaluated."""
    if text == "?":
        return None
    if re.fullmatch(r"\d+", text):
        return int(text)
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_.:]*", text)
    if not all(n in bindings for n in names) or not re.fullmatch(r"[A-Za-z0-9_.:+\-* ]+", text):
        return None
    expr = re.sub(r"[A-Za-z_][A-Za-z0-9_.:]*", lambda m: str(bindings[m.group(0)]), text)
    return eval(expr, {"__builtins__": {}})  # only digits and + - * remain


def check_model(model_dir, bin_dir, onnx, ort, np, helper):
    name = os.path.basename(model_dir)
    path = os.path.join(model_dir, "model.onnx")
    m = onnx.load(path)
    inputs, _ = lib.load_test_data(model_dir)
    init_names = {i.name for i in m.graph.initializer}
    real_inputs = [i for i in m.graph.input if i.name not in init_names]
    bindings = {}
    for vi, arr in zip(real_inputs, inputs):
        for d, size in zip(vi.type.tensor_type.shape.dim, arr.shape):
            if d.dim_param:
                bindings[d.dim_param] = size
    # Expose every node output.
    declared = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in declared and o not in init_names:
                m.graph.output.append(onnx.ValueInfoProto(name=o))
                declared.add(o)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {vi.name: arr for vi, arr in zip(real_inputs, inputs)}
    names = [o.name for o in sess.get_outputs()]
    results = dict(zip(names, sess.run(names, feeds)))
    ours = inferred_shapes(bin_dir, path)
    bad, compared = [], 0
    for value, arr in results.items():
        if value not in ours or not isinstance(arr, np.ndarray):
            continue
        dtype, dims = ours[value]
        want_dtype = helper.np_dtype_to_tensor_dtype(arr.dtype)
        if dtype != want_dtype:
            bad.append(f"{value}: dtype {dtype} vs ORT {want_dtype}")
        if dims is None:
            bad.append(f"{value}: no shape inferred, ORT {list(arr.shape)}")
            continue
        if len(dims) != arr.ndim:
            bad.append(f"{value}: rank of {dims} vs ORT {list(arr.shape)}")
            continue
        for d, size in zip(dims, arr.shape):
            v = eval_dim(d, bindings)
            if v is not None and v != size:
                bad.append(f"{value}: {dims} evaluates to a different size than ORT {list(arr.shape)}")
                break
        compared += 1
    status = "ok  " if not bad else "FAIL"
    print(f"{status} {name}: {compared} values compared (bindings {bindings})")
    for b in bad[:10]:
        print("     " + b)
    return 1 if bad else 0


def main():
    args = lib.parse_args()
    onnx, ort, np = lib.require("onnx", "onnxruntime", "numpy")
    from onnx import helper
    if not os.path.exists(os.path.join(args.bin, "test_unit")):
        print("SKIP: test_unit not built")
        return lib.SKIP
    dirs = lib.model_dirs(args.src, args.k)
    if not dirs:
        print("SKIP: no models")
        return lib.SKIP
    failures = sum(check_model(d, args.bin, onnx, ort, np, helper) for d in dirs)
    print(f"{len(dirs) - failures}/{len(dirs)} models agree with ONNX Runtime")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
