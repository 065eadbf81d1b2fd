#!/usr/bin/env python3
"""The CPU math kernels against ONNX Runtime, op by op.

For each case a one-node model is built with the onnx helper, ONNX Runtime
computes the outputs on seeded random inputs, the pair is written in the
backend-test layout, and `fuserun --backend cpu --check` must pass with
rtol 1e-5 (norm-wise). Covers attribute and opset spellings: Softmax before
and after opset 13, reductions with axes as attribute/input, Conv/pool
padding modes, Gemm transposes, MatMul broadcasting, Einsum forms...
Invoked by ctest as: test_cpu_math_ops_ort.py --bin <build>/bin --src <repo>.
FUSERUN_BACKEND=cuda (and FUSERUN_RTOL, default 1e-5) runs the same cases on
another backend, e.g. on the GPU machine.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fuseopt_testlib import parse_args, require  # noqa: E402

np, onnx, ort = require("numpy", "onnx", "onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def case(name, op, inputs, attrs=None, opset=17, consts=None, n_out=1, domain=""):
    """inputs: list of (name, np.array) fed as graph inputs; consts: list of (name, array) initializers."""
    return dict(name=name, op=op, inputs=inputs, attrs=attrs or {}, opset=opset, consts=consts or [], n_out=n_out)


def r(*shape, seed=0, lo=None):
    a = np.random.RandomState(seed + sum(shape)).randn(*shape).astype(np.float32)
    return np.abs(a) + lo if lo is not None else a


CASES = [
    case("add_bcast", "Add", [("a", r(2, 1, 3)), ("b", r(4, 3, seed=1))]),
    case("sub_scalar", "Sub", [("a", r(3, 4)), ("b", r(1, seed=1))]),
    case("mul_bcast", "Mul", [("a", r(5, 1)), ("b", r(1, 6, seed=1))]),
    case("div", "Div", [("a", r(2, 3)), ("b", r(2, 3, seed=1, lo=0.5))]),
    case("pow", "Pow", [("a", r(2, 3, lo=0.1)), ("b", r(3, seed=1))]),
    case("pow_int_exp", "Pow", [("a", r(2, 3))], consts=[("e", np.array(3, np.int64))]),
    case("mod_fmod", "Mod", [("a", r(2, 3)), ("b", r(2, 3, seed=1, lo=0.5))], {"fmod": 1}),
    case("max3", "Max", [("a", r(2, 3)), ("b", r(3, seed=1)), ("c", r(1, 3, seed=2))]),
    case("min2", "Min", [("a", r(2, 3)), ("b", r(2, 1, seed=1))]),
    case("clip11", "Clip", [("x", r(3, 4))], consts=[("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.7, np.float32))]),
    case("clip6", "Clip", [("x", r(3, 4))], {"min": -0.2, "max": 0.3}, opset=10),
    case("erf", "Erf", [("x", r(4, 5))]),
    case("tanh", "Tanh", [("x", r(4, 5))]),
    case("sigmoid", "Sigmoid", [("x", r(4, 5) * 10)]),
    case("sqrt", "Sqrt", [("x", r(4, 5, lo=0))]),
    case("log", "Log", [("x", r(4, 5, lo=0.1))]),
    case("reciprocal", "Reciprocal", [("x", r(4, 5, lo=0.5))]),
    case("exp", "Exp", [("x", r(4, 5))]),
    case("sincos", "Sin", [("x", r(4, 5))]),
    case("cos", "Cos", [("x", r(4, 5))]),
    case("floor", "Floor", [("x", r(4, 5) * 3)]),
    case("abs_neg", "Abs", [("x", r(4, 5))]),
    case("neg", "Neg", [("x", r(4, 5))]),
    case("relu", "Relu", [("x", r(4, 5))]),
    case("gelu20", "Gelu", [("x", r(4, 5))], opset=20),
    case("gelu20_tanh", "Gelu", [("x", r(4, 5))], {"approximate": "tanh"}, opset=20),
    case("softmax_last", "Softmax", [("x", r(2, 3, 7) * 5)]),
    case("softmax_axis1", "Softmax", [("x", r(2, 3, 7))], {"axis": 1}),
    case("softmax_op11", "Softmax", [("x", r(2, 3, 4))], {"axis": 1}, opset=11),
    case("logsoftmax", "LogSoftmax", [("x", r(2, 3, 7))], {"axis": -2}),
    case("reducemean_attr", "ReduceMean", [("x", r(2, 3, 4))], {"axes": [-1, 0]}, opset=17),
    case("reducemean_input", "ReduceMean", [("x", r(2, 3, 4))], {"keepdims": 0}, opset=18, consts=[("axes", np.array([1], np.int64))]),
    case("reducesum_input", "ReduceSum", [("x", r(2, 3, 4))], {}, opset=13, consts=[("axes", np.array([-1, 1], np.int64))]),
    case("reducesum_all", "ReduceSum", [("x", r(2, 3, 4))], {"keepdims": 0}, opset=13),
    case("reducemax", "ReduceMax", [("x", r(2, 3, 4))], {"axes": [1]}, opset=17),
    case("cumsum_excl_rev", "CumSum", [("x", r(3, 5))], {"exclusive": 1, "reverse": 1}, consts=[("axis", np.array(-1, np.int64))]),
    case("matmul_bcast", "MatMul", [("a", r(2, 1, 5, 7)), ("b", r(3, 7, 4, seed=1))]),
    case("matmul_vec", "MatMul", [("a", r(7)), ("b", r(2, 7, 3, seed=1))]),
    case("matmul_big", "MatMul", [("a", r(33, 70)), ("b", r(70, 530, seed=1))]),
    case("gemm_t", "Gemm", [("a", r(6, 5)), ("b", r(7, 6, seed=1)), ("c", r(7, seed=2))], {"transA": 1, "transB": 1, "alpha": 0.7, "beta": 1.3}),
    case("gemm_c2d", "Gemm", [("a", r(5, 6)), ("b", r(6, 7, seed=1)), ("c", r(5, 1, seed=2))]),
    case("conv_pads", "Conv", [("x", r(2, 4, 9, 8)), ("w", r(6, 2, 3, 3, seed=1)), ("b", r(6, seed=2))],
         {"group": 2, "pads": [1, 2, 0, 1], "strides": [2, 1], "dilations": [1, 2]}),
    case("conv_same_lower", "Conv", [("x", r(1, 3, 7, 7)), ("w", r(4, 3, 4, 4, seed=1))], {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    case("conv_same_upper", "Conv", [("x", r(1, 3, 7, 7)), ("w", r(4, 3, 4, 4, seed=1))], {"auto_pad": "SAME_UPPER"}),
    case("conv_1d", "Conv", [("x", r(2, 4, 11)), ("w", r(5, 4, 3, seed=1)), ("b", r(5, seed=2))], {"pads": [1, 1], "strides": [2]}),
    case("conv_1x1", "Conv", [("x", r(2, 8, 5, 5)), ("w", r(4, 8, 1, 1, seed=1))]),
    case("conv_depthwise", "Conv", [("x", r(1, 6, 6, 6)), ("w", r(6, 1, 3, 3, seed=1))], {"group": 6, "pads": [1, 1, 1, 1]}),
    case("maxpool", "MaxPool", [("x", r(2, 3, 9, 9))], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    case("maxpool_ceil", "MaxPool", [("x", r(1, 2, 8, 8))], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    case("maxpool_dil", "MaxPool", [("x", r(1, 2, 8, 8))], {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    case("avgpool_excl", "AveragePool", [("x", r(2, 3, 7, 7))], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    case("avgpool_incl", "AveragePool", [("x", r(2, 3, 7, 7))], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    case("avgpool_same", "AveragePool", [("x", r(1, 2, 7, 7))], {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    case("gap", "GlobalAveragePool", [("x", r(2, 5, 4, 3))]),
    case("gmp", "GlobalMaxPool", [("x", r(2, 5, 4, 3))]),
    case("batchnorm", "BatchNormalization", [("x", r(2, 3, 4, 5)), ("s", r(3, seed=1)), ("b", r(3, seed=2)), ("m", r(3, seed=3)), ("v", r(3, seed=4, lo=0.5))], {"epsilon": 1e-3}),
    case("layernorm", "LayerNormalization", [("x", r(2, 5, 16)), ("g", r(16, seed=1)), ("b", r(16, seed=2))], {"epsilon": 1e-5}),
    case("layernorm_axis1_3out", "LayerNormalization", [("x", r(2, 3, 4)), ("g", r(3, 4, seed=1))], {"axis": 1}, n_out=3),
    case("einsum_attn", "Einsum", [("q", r(2, 3, 5, 4)), ("k", r(2, 3, 6, 4, seed=1))], {"equation": "bhqd,bhkd->bhqk"}),
    case("einsum_bmm", "Einsum", [("a", r(2, 5, 4)), ("b", r(2, 4, 3, seed=1))], {"equation": "bij,bjk->bik"}),
    case("einsum_ellipsis", "Einsum", [("a", r(2, 3, 5, 4)), ("b", r(4, 6, seed=1))], {"equation": "...ij,jk->...ik"}),
    case("einsum_outer", "Einsum", [("a", r(3)), ("b", r(4, seed=1))], {"equation": "i,j->ij"}),
    case("einsum_transpose", "Einsum", [("a", r(2, 3, 4))], {"equation": "abc->cab"}),
]


def build(c):
    nodes_in, graph_inputs, inits = [], [], []
    for n, a in c["inputs"]:
        nodes_in.append(n)
        graph_inputs.append(helper.make_tensor_value_info(n, F if a.dtype == np.float32 else I64, list(a.shape)))
    for n, a in c["consts"]:
        nodes_in.append(n)
        inits.append(numpy_helper.from_array(a, n))
    outs = [f"y{i}" for i in range(c["n_out"])]
    node = helper.make_node(c["op"], nodes_in, outs, name=c["name"], **c["attrs"])
    g = helper.make_graph([node], c["name"], graph_inputs,
                          [helper.make_tensor_value_info(o, F, None) for o in outs], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", c["opset"])], ir_version=8)


def main():
    args = parse_args()
    fuserun = os.path.join(args.bin, "fuserun")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in CASES:
            if args.k and args.k not in c["name"]:
                continue
            d = os.path.join(tmp, c["name"])
            data = os.path.join(d, "test_data_set_0")
            os.makedirs(data)
            m = build(c)
            path = os.path.join(d, "model.onnx")
            onnx.save(m, path)
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            feeds = {n: a for n, a in c["inputs"]}
            outs = sess.run(None, feeds)
            for i, (n, a) in enumerate(c["inputs"]):
                with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(a, n).SerializeToString())
            for i, o in enumerate(outs):
                with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(np.asarray(o), f"y{i}").SerializeToString())
            backend = os.environ.get("FUSERUN_BACKEND", "cpu")
            rtol = os.environ.get("FUSERUN_RTOL", "1e-5")
            p = subprocess.run([fuserun, "--backend", backend, "-q", "--rtol", rtol, "--check", data, path],
                               capture_output=True, text=True, timeout=120)
            ok = p.returncode == 0 and "check: PASS" in p.stdout
            print(("ok   " if ok else "FAIL ") + c["name"])
            if not ok:
                failures.append(c["name"])
                print(p.stdout[-1500:], p.stderr[-1500:])
    print(f"{len(CASES) - len(failures)}/{len(CASES)} cases pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
