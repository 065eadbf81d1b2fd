"""Shared helpers for the Python-driven fuseopt tests (ONNX Runtime as the oracle).

Each tests/py/test_*.py is one ctest, invoked as `python3 test_x.py --bin BUILD/bin --src REPO`;
exit code 77 means skipped (a Python package is missing)."""
import argparse
import glob
import os
import re
import subprocess
import sys

SKIP = 77


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="build/bin folder with fuseopt")
    ap.add_argument("--src", required=True, help="repository root")
    ap.add_argument("-k", default="", help="only models whose folder name contains this")
    return ap.parse_args()


def require(*modules):
    """Imports the modules or exits with the skip code."""
    loaded = []
    for m in modules:
        try:
            loaded.append(__import__(m))
        except ImportError:
            print(f"SKIP: python package '{m}' is not installed")
            sys.exit(SKIP)
    return loaded


def expecter(failures, quiet_ok=False):
    """The check every CLI-style test makes: expect(cond, what) prints "ok   what" (unless
    quiet_ok) or "FAIL what", appends `what` to `failures` when cond is false, returns cond.

        failures = []
        expect = lib.expecter(failures)
        expect(r.returncode == 0, "fuseopt exits 0")
        ...
        return 1 if failures else 0
    """
    def expect(cond, what):
        if not cond or not quiet_ok:
            print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)
        return cond
    return expect


def all_nodes(graph):
    """The graph's nodes and those of its If/Loop/Scan bodies, recursively (Optimum's merged
    decoders hold the whole model in the two branches of one If; src/pass/subgraph_fusion.h)."""
    out = []
    for n in graph.node:
        out.append(n)
        for a in n.attribute:
            if a.HasField("g"):
                out += all_nodes(a.g)
            for g in a.graphs:
                out += all_nodes(g)
    return out


def weight_gemm_softmaxes(graph):
    """Softmax nodes of `graph` (If/Loop/Scan bodies included) that are not attention: their
    input is a projection of activations by a constant weight (a MoE router's x·W_gate, ConvBERT's
    dynamic-convolution kernel), reached back through layout-only nodes and constant bias / scale
    terms. Attention scores are Q·Kᵀ, a product of two computed operands."""
    nodes = all_nodes(graph)
    prod = {o: n for n in nodes for o in n.output}
    consts = {t.name for t in graph.initializer} | {o for n in nodes if n.op_type == "Constant" for o in n.output}
    consts |= {n.output[0] for n in nodes if n.op_type == "Identity" and n.input[0] in consts}  # TorchScript's shared weights
    through = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Cast", "Identity", "Flatten"}
    found = []
    for sm in (n for n in nodes if n.op_type == "Softmax"):
        v = sm.input[0]
        for _ in range(8):
            n = prod.get(v)
            if n is None:
                break
            if n.op_type in ("MatMul", "Gemm"):
                if len(n.input) > 1 and n.input[1] in consts:
                    found.append(sm)
                break
            if n.op_type in through or (n.op_type == "TopK" and v == n.output[0]):  # GPT-OSS: softmax of the top-k logits
                v = n.input[0]
            elif n.op_type in ("Add", "Mul", "Div", "Sub") and sum(i in consts for i in n.input) == 1:
                v = next(i for i in n.input if i not in consts)
            else:
                break
    return found


def run_fuseopt(bin_dir, *args, timeout=600):
    exe = os.path.join(bin_dir, "fuseopt")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)


def model_dirs(src, name_filter=""):
    """Every models/{real,exported,synthetic}/<name>/ folder with model.onnx and test_data_set_0/."""
    found = []
    for pattern in ("models/real/*/model.onnx", "models/exported/*/model.onnx", "models/synthetic/*/model.onnx"):
        for path in sorted(glob.glob(os.path.join(src, pattern))):
            d = os.path.dirname(path)
            if os.path.isdir(os.path.join(d, "test_data_set_0")) and name_filter in os.path.basename(d):
                found.append(d)
    return found


def data_files(data_dir, prefix):
    """The <prefix>_N.pb files of a test_data_set folder in N's order (input_10 after input_9,
    not after input_1: a seq2seq decoder step has a dozen inputs)."""
    paths = glob.glob(os.path.join(data_dir, f"{prefix}_*.pb"))
    return sorted(paths, key=lambda p: int(re.search(r"_(\d+)\.pb$", p).group(1)))


def load_test_data(model_dir):
    """(inputs in file order, outputs in file order) as numpy arrays."""
    import onnx
    from onnx import numpy_helper
    data = os.path.join(model_dir, "test_data_set_0")

    def read(prefix):
        out = []
        i = 0
        while os.path.exists(os.path.join(data, f"{prefix}_{i}.pb")):
            t = onnx.TensorProto()
            with open(os.path.join(data, f"{prefix}_{i}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            out.append(numpy_helper.to_array(t))
            i += 1
        return out

    return read("input"), read("output")


def run_ort(model_path, inputs):
    import onnxruntime as ort
    so = ort.SessionOptions()
    # The model must be right as written: no ORT graph rewrites hide our mistakes.
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    import numpy as np
    # np.asarray: numpy scalars (np.bool_, np.float32) are not accepted as feeds.
    feeds = {i.name: np.asarray(x) for i, x in zip(sess.get_inputs(), inputs)}
    return sess.run(None, feeds)


def compare(got, want, atol, rtol):
    """None when close, else a one-line description of the worst element."""
    import numpy as np
    if got.shape != want.shape:
        return f"shape {got.shape} != reference {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != reference {want.dtype}"
    if got.dtype == np.float16:
        # Half-precision outputs: a fused op rounds once where the original
        # graph rounded after every op; DESIGN.md's fp16 tolerance is 1e-2.
        atol, rtol = max(atol, 1e-2), max(rtol, 1e-2)
    if got.dtype.kind in "fc":
        if np.isnan(got).any() and not np.isnan(want).any():
            return "NaN in output"
        g64 = got.astype(np.float64)
        w64 = want.astype(np.float64)
        err = np.abs(g64 - w64) - (atol + rtol * np.abs(w64))
        if (err > 0).any():
            i = int(np.argmax(err))
            return f"max violation at flat index {i}: got {g64.flat[i]}, want {w64.flat[i]}"
        return None
    if not (got == want).all():
        return "integer/bool output differs"
    return None


def run_over_models(check_one, *modules, select=None):
    """The driver every per-model test shares: `check_one(args, model_dir, tmp)`
    returns a list of failure lines for one model folder; prints them and a
    summary, returns the exit status. Without `select` every model folder is
    checked (SKIP when there are none); with it, only the folders whose name it
    accepts, and finding none is a failure (the test names bundled models)."""
    import tempfile
    args = parse_args()
    require(*modules)
    dirs = model_dirs(args.src, args.k)
    if select is not None:
        dirs = [d for d in dirs if select(os.path.basename(d))]
        if not dirs:
            print("FAIL: none of the models this test needs is under models/")
            return 1
    if not dirs:
        print("SKIP: no models with test_data_set_0 under models/")
        return SKIP
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in dirs:
            failures += check_one(args, d, tmp)
    for f in failures:
        print("FAIL " + f)
    print(f"{len(dirs)} models, {len(failures)} failures")
    return 1 if failures else 0


def ort_failures(name, model_path, model_dir, atol, rtol):
    """ONNX Runtime on `model_path` against model_dir/test_data_set_0: failure lines."""
    inputs, refs = load_test_data(model_dir)
    try:
        got = run_ort(model_path, inputs)
    except Exception as e:  # noqa: BLE001 - any ORT refusal is a failure
        return [f"{name}: onnxruntime failed: {str(e).splitlines()[0]}"]
    return [f"{name}: onnxruntime output {i}: {why}"
            for i, (g, w) in enumerate(zip(got, refs)) if (why := compare(g, w, atol, rtol))]


def fuserun_cpu_failures(bin_dir, name, model_path, model_dir):
    """fuseopt's own CPU kernels (not the function bodies) on `model_path`:
    `fuserun --backend cpu --check model_dir/test_data_set_0`; failure lines."""
    fr = subprocess.run([os.path.join(bin_dir, "fuserun"), model_path, "--backend", "cpu", "--check",
                         os.path.join(model_dir, "test_data_set_0")], capture_output=True, text=True, timeout=600)
    if fr.returncode == 0:
        return []
    tail = (fr.stdout + fr.stderr).strip().splitlines()[-3:]
    return [f"{name}: fuserun --backend cpu --check exit {fr.returncode}: {' | '.join(tail)}"]


GEMM_OPS = {"MatMul", "Gemm", "FusedMatMul", "LayerNormLinear", "GatedMatMul"}


def leftover_activations(graph):
    """Erf/Tanh nodes that a fusion should have absorbed, as (op, name) pairs.

    An Erf is left over when its GELU reads a GEMM output (or a GEMM plus bias): FusedMatMul
    should have taken it. A GELU after a Conv or a norm has no GEMM to fold into (Whisper's and
    wav2vec2's convolutional stems). A Tanh is left over unless it soft-caps attention scores on
    their way to a Softmax (Gemma-2's cap*tanh(s/cap) where the Attention fusion was refused) or
    is a Conv stem's own activation (Moonshine)."""
    prod = {o: n for n in graph.node for o in n.output}
    cons = {}
    for n in graph.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)

    def from_gemm(v):
        p = prod.get(v)
        if p is None:
            return False
        if p.op_type in GEMM_OPS:
            return True
        return p.op_type == "Add" and any(prod.get(i) is not None and prod[i].op_type in GEMM_OPS for i in p.input)

    def reaches_softmax(n, depth=4):
        if depth == 0:
            return False
        for o in n.output:
            for c in cons.get(o, []):
                if c.op_type == "Softmax" or reaches_softmax(c, depth - 1):
                    return True
        return False

    left = []
    for n in graph.node:
        if n.op_type == "Erf":
            scaled = prod.get(n.input[0])
            xs = list(scaled.input) if scaled is not None else [n.input[0]]
            if any(from_gemm(x) for x in xs):
                left.append((n.op_type, n.name))
        elif n.op_type == "Tanh" and not reaches_softmax(n):
            p = prod.get(n.input[0])
            if p is None or p.op_type != "Conv":  # Moonshine's stem: tanh(conv1(audio)), no GEMM
                left.append((n.op_type, n.name))
    return left


def reduces_last_axis(node, inits, model):
    """True when a ReduceMean/ReduceSum reduces its input's last axis (axes from the attribute
    or, opset 18+, a constant input; no axes = every axis, which includes the last). Unknown
    axes count as the last (the caller's check stays strict)."""
    from onnx import numpy_helper
    axes = None
    for a in node.attribute:
        if a.name == "axes":
            axes = list(a.ints)
    if axes is None and len(node.input) > 1 and node.input[1]:
        t = inits.get(node.input[1])
        if t is None:
            return True
        axes = [int(x) for x in numpy_helper.to_array(t).ravel()]
    if not axes:
        return True
    rank = None
    for v in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        if v.name == node.input[0] and v.type.tensor_type.HasField("shape"):
            rank = len(v.type.tensor_type.shape.dim)
    return -1 in axes or (rank is not None and rank - 1 in axes) or rank is None


def pows_outside_l2_norm(graph):
    """Names of the Pow nodes that are not part of an L2 normalisation written
    sum(x ** 2) ** 0.5 (CLIP's embeddings: a Pow feeding or fed by a ReduceSum). Those
    stay as ordinary ops (a [B, D] reduction, cheap); any other Pow is a decomposed norm
    or GELU that a fusion should have taken."""
    prod = {o: n for n in graph.node for o in n.output}
    cons = {}
    for n in graph.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)
    left = []
    for n in graph.node:
        if n.op_type != "Pow":
            continue
        feeds_sum = any(c.op_type == "ReduceSum" for c in cons.get(n.output[0], []))
        p = prod.get(n.input[0])
        if not (feeds_sum or (p is not None and p.op_type == "ReduceSum")):
            left.append(n.name)
    return left


def run_pytest_file(path, extra=()):
    """ctest entry of a pytest file of the Python API: `python3 FILE --bin BUILD/bin --src REPO`
    imports fuseopt from BUILD/python and runs FILE's tests (-rs prints every skip's reason).
    Exit 77 (Skipped) when pytest, onnx or the module is missing; 1 when a built module does
    not import."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--src", required=True)
    a = ap.parse_args()
    try:
        import pytest
    except ImportError:
        print("SKIP: python package 'pytest' is not installed (pip install pytest)")
        return SKIP
    os.environ["FUSEOPT_BIN_DIR"] = a.bin
    os.environ["FUSEOPT_SOURCE_DIR"] = a.src
    build_pkg = os.path.join(os.path.dirname(os.path.abspath(a.bin)), "python", "fuseopt")
    if not os.path.isdir(build_pkg) or not any(f.startswith("_fuseopt") for f in os.listdir(build_pkg)):
        print(f"SKIP: the Python module is not built ({build_pkg}; configure with -DFUSEOPT_PYTHON=ON, "
              "which needs pybind11-dev)")
        return SKIP
    sys.path.insert(0, os.path.dirname(build_pkg))
    try:
        import fuseopt  # noqa: F401  a module that is built but does not import is a failure
    except ImportError as e:
        print(f"FAIL: {build_pkg} does not import: {e}")
        return 1
    try:
        import onnx  # noqa: F401
    except ImportError:
        print("SKIP: python package 'onnx' is not installed")
        return SKIP
    return int(pytest.main([os.path.abspath(path), "-rs", "-v", "-p", "no:cacheprovider", *extra]))
