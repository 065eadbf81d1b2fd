#!/usr/bin/env python3
"""If nodes: the branch picked at run time reads outer-scope values; results match ONNX Runtime.

A model with If(cond) whose then-branch computes Relu(x + w) (w an outer initializer) and whose
else-branch computes x * 2 with a nested Shape, checked with cond true and false.
Invoked by ctest as: test_fuserun_if.py --bin <build>/bin --src <repo>.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fuseopt_testlib import parse_args, require  # noqa: E402

np, onnx, ort = require("numpy", "onnx", "onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def model():
    F = TensorProto.FLOAT
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["t0"]), helper.make_node("Relu", ["t0"], ["t_out"])],
        "then", [], [helper.make_tensor_value_info("t_out", F, None)])
    else_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["e_out"])],
        "else", [], [helper.make_tensor_value_info("e_out", F, None)],
        initializer=[numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    nodes = [
        helper.make_node("If", ["cond"], ["y"], name="the_if", then_branch=then_g, else_branch=else_g),
        helper.make_node("Sigmoid", ["y"], ["z"], name="after"),
    ]
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, []), helper.make_tensor_value_info("x", F, [2, 3])],
        [helper.make_tensor_value_info("z", F, None)],
        initializer=[numpy_helper.from_array(np.linspace(-1, 1, 6).astype(np.float32).reshape(2, 3), "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def main():
    args = parse_args()
    fuserun = os.path.join(args.bin, "fuserun")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "if.onnx")
        onnx.save(model(), path)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        x = np.random.RandomState(0).randn(2, 3).astype(np.float32)
        for flag in (True, False):
            d = os.path.join(tmp, f"data_{flag}")
            os.makedirs(d)
            feeds = {"cond": np.array(flag), "x": x}
            (ref,) = sess.run(None, feeds)
            for i, (n, a) in enumerate(feeds.items()):
                with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(a, n).SerializeToString())
            with open(os.path.join(d, "output_0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(ref, "z").SerializeToString())
            backend = os.environ.get("FUSERUN_BACKEND", "cpu")
            p = subprocess.run([fuserun, "--backend", backend, "-q", "--rtol", "1e-6", "--iters", "2", "--check", d, path],
                               capture_output=True, text=True, timeout=120)
            good = p.returncode == 0 and "check: PASS" in p.stdout
            print(("ok   " if good else "FAIL ") + f"cond={flag}")
            if not good:
                print(p.stdout[-1500:], p.stderr[-1500:])
            ok = ok and good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
