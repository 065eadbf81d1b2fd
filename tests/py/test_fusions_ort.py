"""The H4 fusions (LayerNorm, RMSNorm, SkipLayerNorm, FusedMatMul, AddRelu) and GatedMatMul on every
model in models/real and models/exported, run after the cleanup passes and alone
(so a failure points at these fusions): the written model must pass
onnx.checker (full_check) and ONNX Runtime must reproduce test_data_set_0
(fp32, 1e-4) through the fuseopt-domain function bodies, and `fuserun --backend
cpu --check` through fuseopt's own CPU kernels. Plus structural
acceptance checks: every residual Add+Relu of resnet_tiny is an AddRelu, no
standalone ReduceMean-LayerNorm / Erf / tanh-GELU primitives are left, and
every residual Add that precedes a norm is fused into SkipLayerNorm."""
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

PASSES = "cleanup,LayerNorm,RMSNorm,SkipLayerNorm,GatedMatMul,FusedMatMul,AddRelu"
ATOL = RTOL = 1e-4
NORMS = {"LayerNormalization", "LayerNorm", "RMSNorm"}


def producers(graph):
    return {o: n for n in graph.node for o in n.output}


def structural_failures(name, model):
    g = model.graph
    ops = Counter(n.op_type for n in g.node)
    prod = producers(g)
    fails = []
    if "resnet" in name:
        left = [n.name for n in g.node if n.op_type == "Relu" and n.input[0] in prod and prod[n.input[0]].op_type == "Add"]
        if left or ops["AddRelu"] == 0:
            fails.append(f"{name}: residual Add+Relu not fused: {left or 'no AddRelu at all'}")
    for op, node_name in lib.leftover_activations(g):
        fails.append(f"{name}: {op} '{node_name}' left (an unfused GELU)")
    for n in g.node:
        if n.op_type == "Sqrt":
            fails.append(f"{name}: Sqrt '{n.name}' left (an unfused norm)")
    for n in g.node:
        if n.op_type in NORMS and n.input[0] in prod and prod[n.input[0]].op_type == "Add":
            fails.append(f"{name}: residual Add before {n.op_type} '{n.name}' is not fused")
    return fails


def check_one(args, model_dir, tmp):
    import onnx
    name = os.path.basename(os.path.dirname(model_dir)) + "/" + os.path.basename(model_dir)
    src = os.path.join(model_dir, "model.onnx")
    out = os.path.join(tmp, os.path.basename(model_dir) + ".onnx")
    r = lib.run_fuseopt(args.bin, src, out, "-q", "--passes", PASSES)
    if r.returncode != 0:
        return [f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()}"]
    failures = []
    model = onnx.load(out, load_external_data=False)
    if any(n.domain == "fuseopt" for n in model.graph.node):
        if not any(o.domain == "fuseopt" and o.version == 1 for o in model.opset_import):
            failures.append(f"{name}: no opset import for domain fuseopt version 1")
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset <= onnx.defs.onnx_opset_version():
        try:
            onnx.checker.check_model(out, full_check=True)
        except Exception as e:  # noqa: BLE001 - any checker complaint is a failure
            failures.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
    # The synthetic neg_* models exist to show a fusion must NOT fire
    # (tests/py/test_synthetic_models.py checks the report's reasons), so
    # primitives left in them are the expected outcome.
    if not os.path.basename(model_dir).startswith("neg_"):
        failures += structural_failures(name, model)
    failures += lib.ort_failures(name, out, model_dir, ATOL, RTOL)
    failures += lib.fuserun_cpu_failures(args.bin, name, out, model_dir)
    # Idempotence: the optimized model optimized again keeps its op counts.
    out2 = os.path.join(tmp, os.path.basename(model_dir) + ".again.onnx")
    r2 = lib.run_fuseopt(args.bin, out, out2, "-q", "--passes", PASSES)
    if r2.returncode != 0:
        failures.append(f"{name}: fuseopt on its own output: exit {r2.returncode}: {r2.stderr.strip()}")
    else:
        c1 = Counter(n.op_type for n in model.graph.node)
        c2 = Counter(n.op_type for n in onnx.load(out2, load_external_data=False).graph.node)
        if c1 != c2:
            failures.append(f"{name}: not idempotent: {dict(c1 - c2)} -> {dict(c2 - c1)}")
    fused = Counter(n.op_type for n in model.graph.node if n.domain == "fuseopt")
    print(f"ok {name}: {dict(fused)}" if not failures else f"FAIL {name}")
    return failures


def main():
    return lib.run_over_models(check_one, "onnx", "onnxruntime", "numpy")


if __name__ == "__main__":
    sys.exit(main())
