"""Synthetic models that stress the cleanup passes end to end, checked with
ONNX Runtime (original vs optimized, several input shapes so nothing dynamic
was baked in):
- exporter-style shape subgraph (Shape/Gather/Unsqueeze/Concat -> Reshape)
  with a symbolic batch and a static feature dim (partial folding),
- duplicated shape computations (CSE), Constant nodes, Identity, Dropout,
- an If whose branches read outer values by name (must survive renaming)."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def shape_model(helper, TP, numpy_helper, np):
    x = helper.make_tensor_value_info("x", TP.FLOAT, ["batch", 4, 6])
    y = helper.make_tensor_value_info("y", TP.FLOAT, ["batch", 24])
    z = helper.make_tensor_value_info("z", TP.FLOAT, ["batch", 4, 6])
    c = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.int64)))
    nodes = [
        c("i0", 0), c("i1", 1), c("i2", 2), c("ax", [0]),
        # Two copies of the same shape computation (CSE), each partly static.
        helper.make_node("Shape", ["x"], ["s1"]),
        helper.make_node("Shape", ["x"], ["s2"]),
        helper.make_node("Gather", ["s1", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["s2", "i1"], ["d1"], axis=0),
        helper.make_node("Gather", ["s2", "i2"], ["d2"], axis=0),
        helper.make_node("Mul", ["d1", "d2"], ["feat"]),
        helper.make_node("Unsqueeze", ["b", "ax"], ["bu"]),
        helper.make_node("Unsqueeze", ["feat", "ax"], ["fu"]),
        helper.make_node("Concat", ["bu", "fu"], ["target"], axis=0),
        helper.make_node("Identity", ["x"], ["xi"]),
        helper.make_node("Dropout", ["xi"], ["xd"]),
        helper.make_node("Reshape", ["xd", "target"], ["y"]),
        helper.make_node("Relu", ["xd"], ["z"]),
    ]
    g = helper.make_graph(nodes, "shapes", [x], [y, z])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), [("x", [4, 6])]


def if_model(helper, TP, numpy_helper, np):
    x = helper.make_tensor_value_info("x", TP.FLOAT, [3])
    cond = helper.make_tensor_value_info("cond", TP.BOOL, [])
    out = helper.make_tensor_value_info("out", TP.FLOAT, [3])
    then_out = helper.make_tensor_value_info("t", TP.FLOAT, [3])
    else_out = helper.make_tensor_value_info("e", TP.FLOAT, [3])
    then_g = helper.make_graph([helper.make_node("Neg", ["via_identity"], ["t"])], "then", [], [then_out])
    else_g = helper.make_graph([helper.make_node("Abs", ["twin"], ["e"])], "else", [], [else_out])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Identity", ["r"], ["via_identity"]),
        helper.make_node("Sigmoid", ["x"], ["first"]),
        helper.make_node("Sigmoid", ["x"], ["twin"]),  # CSE duplicate of 'first', read by name below
        helper.make_node("If", ["cond"], ["branch"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Add", ["branch", "first"], ["out"]),
    ]
    g = helper.make_graph(nodes, "ifs", [x, cond], [out])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), None


def main():
    args = lib.parse_args()
    np, onnx, _ = lib.require("numpy", "onnx", "onnxruntime")
    from onnx import helper, numpy_helper, TensorProto as TP
    failures = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (("shape_subgraph", shape_model), ("if_by_name", if_model)):
            model, _ = make(helper, TP, numpy_helper, np)
            model.ir_version = 8
            src = os.path.join(tmp, f"{name}.onnx")
            dst = os.path.join(tmp, f"{name}.opt.onnx")
            onnx.save(model, src)
            r = lib.run_fuseopt(args.bin, src, dst, "-q")
            if r.returncode != 0:
                failures.append(f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()}")
                continue
            onnx.checker.check_model(dst, full_check=True)
            opt = onnx.load(dst)
            ops = [n.op_type for n in opt.graph.node]
            if name == "shape_subgraph":
                feeds_list = [[rng.standard_normal((b, 4, 6)).astype(np.float32)] for b in (1, 2, 5)]
                if ops.count("Shape") > 1 or "Identity" in ops or "Dropout" in ops or "Constant" in ops \
                        or "Mul" in ops:
                    failures.append(f"{name}: cleanup left {ops}")
            else:
                feeds_list = [[rng.standard_normal(3).astype(np.float32), np.array(c)] for c in (True, False)]
                if ops.count("Sigmoid") != 2 and ops.count("Sigmoid") != 1:
                    failures.append(f"{name}: unexpected {ops}")
            for feeds in feeds_list:
                want = lib.run_ort(src, feeds)
                got = lib.run_ort(dst, feeds)
                for i, (g_, w) in enumerate(zip(got, want)):
                    problem = lib.compare(g_, w, 1e-6, 1e-6)
                    if problem:
                        failures.append(f"{name}: output {i} with input shapes "
                                        f"{[np.shape(f) for f in feeds]}: {problem}")
            print(f"{'ok  ' if not failures else 'FAIL'} {name}: {len(model.graph.node)} -> {len(ops)} nodes {ops}")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
