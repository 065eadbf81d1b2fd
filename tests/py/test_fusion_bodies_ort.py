"""Every function-body variant (overload) of the H4 fused ops, checked in ONNX Runtime:
small models written here in primitives (several opsets, with/without bias, beta,
Sum output, each activation (tanh: BERT's pooler, also inside LayerNormLinear; relu2: squared
ReLU as Pow(Relu, 2) or Mul(r, r), Nemotron / Persimmon, also inside LayerNormLinear),
transB/alpha/beta on Gemm, Conv+BatchNormalization, the pre-LN residual Add moved into the
GEMM (FusedMatMul's residual input: LayerNormLinear, SkipLayerNorm, RMS, GPT-2's Gemm view))
are optimized by fuseopt; the result must pass onnx.checker (full_check), contain
the expected fused op, and give ONNX Runtime's outputs of the original (1e-4)."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

PASSES = "cleanup,ConvBnFold,LayerNorm,RMSNorm,SkipLayerNorm,FusedMatMul,AddRelu"


def build_models():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    F = TensorProto.FLOAT

    def const(name, arr):
        return numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name)

    def model(name, opset, nodes, inputs, outputs, inits, expect, dtype=np.float32):
        et = TensorProto.DOUBLE if dtype == np.float64 else F
        if dtype != np.float32:
            inits = [numpy_helper.from_array(numpy_helper.to_array(t).astype(dtype), t.name)
                     if t.data_type == F else t for t in inits]
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, et, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, et, None) for n in outputs], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        feeds = {n: (rng.standard_normal(s) * 2).astype(dtype) for n, s in inputs}
        return name, m, feeds, expect

    def reduce_mean(x, out, opset):
        if opset >= 18:
            return [helper.make_node("ReduceMean", [x, "axes"], [out])]
        return [helper.make_node("ReduceMean", [x], [out], axes=[-1])]

    def ln_nodes(x, y, opset, beta=True, prefix="ln"):
        p = prefix
        n = reduce_mean(x, f"{p}_mean", opset)
        n += [helper.make_node("Sub", [x, f"{p}_mean"], [f"{p}_d"]),
              helper.make_node("Pow", [f"{p}_d", "two"], [f"{p}_sq"])]
        n += reduce_mean(f"{p}_sq", f"{p}_var", opset)
        n += [helper.make_node("Add", [f"{p}_var", "eps"], [f"{p}_ve"]),
              helper.make_node("Sqrt", [f"{p}_ve"], [f"{p}_sd"]),
              helper.make_node("Div", [f"{p}_d", f"{p}_sd"], [f"{p}_n"]),
              helper.make_node("Mul", [f"{p}_n", "gamma"], [f"{p}_g" if beta else y])]
        if beta:
            n.append(helper.make_node("Add", [f"{p}_g", "beta"], [y]))
        return n

    def rms_nodes(x, y, opset):
        n = [helper.make_node("Pow", [x, "two"], ["r_sq"])] + reduce_mean("r_sq", "r_ms", opset)
        n += [helper.make_node("Add", ["r_ms", "eps"], ["r_ve"]), helper.make_node("Sqrt", ["r_ve"], ["r_sd"]),
              helper.make_node("Reciprocal", ["r_sd"], ["r_inv"]), helper.make_node("Mul", [x, "r_inv"], ["r_n"]),
              helper.make_node("Mul", ["gamma", "r_n"], [y])]
        return n

    D = 16
    common = [const("two", 2.0), const("eps", 1e-5), const("gamma", rng.uniform(0.5, 1.5, D)),
              const("beta", rng.standard_normal(D)), numpy_helper.from_array(np.array([-1], np.int64), "axes")]
    out = []
    for opset in (14, 17, 18):
        for beta in (True, False):
            out.append(model(f"ln_op{opset}_{'beta' if beta else 'nobeta'}", opset, ln_nodes("x", "y", opset, beta),
                             [("x", [2, 3, D])], ["y"], common,
                             "LayerNorm" if opset < 17 else "LayerNormalization"))
        out.append(model(f"rms_op{opset}", opset, rms_nodes("x", "y", opset), [("x", [2, 3, D])], ["y"], common,
                         "RMSNorm"))
        # Residual + bias before a LayerNorm, the sum read again (pre-LN): SkipLayerNorm with Sum.
        nodes = [helper.make_node("Add", ["x", "bias"], ["xb"]), helper.make_node("Add", ["xb", "skip"], ["s"])]
        nodes += ln_nodes("s", "n", opset) + [helper.make_node("Add", ["s", "n"], ["y"])]
        out.append(model(f"skipln_sum_op{opset}", opset, nodes, [("x", [2, 3, D]), ("skip", [2, 3, D])], ["y"],
                         common + [const("bias", rng.standard_normal(D))], "SkipLayerNorm"))
        # Residual before an RMSNorm, sum not reused.
        nodes = [helper.make_node("Add", ["x", "skip"], ["s"])] + rms_nodes("s", "y", opset)
        out.append(model(f"skiprms_op{opset}", opset, nodes, [("x", [2, 3, D]), ("skip", [2, 3, D])], ["y"], common,
                         "SkipLayerNorm"))
        # FusedMatMul variants.
        W = const("W", rng.standard_normal((D, 8)))
        Wt = const("Wt", rng.standard_normal((8, D)))
        b8 = const("b8", rng.standard_normal(8))
        gelu = [helper.make_node("Div", ["h", "sqrt2"], ["g1"]), helper.make_node("Erf", ["g1"], ["g2"]),
                helper.make_node("Add", ["g2", "one"], ["g3"]), helper.make_node("Mul", ["h", "g3"], ["g4"]),
                helper.make_node("Mul", ["g4", "half"], ["y"])]
        gconst = [const("sqrt2", 1.4142135), const("one", 1.0), const("half", 0.5)]
        out.append(model(f"mm_bias_gelu_op{opset}", opset,
                         [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Add", ["p", "b8"], ["h"])] + gelu,
                         [("x", [2, 3, D])], ["y"], [W, b8] + gconst, "FusedMatMul"))
        out.append(model(f"mm_gelu_nobias_op{opset}", opset, [helper.make_node("MatMul", ["x", "W"], ["h"])] + gelu,
                         [("x", [2, 3, D])], ["y"], [W] + gconst, "FusedMatMul"))
        tanh = [helper.make_node("Pow", ["h", "three"], ["t1"]), helper.make_node("Mul", ["t1", "c"], ["t2"]),
                helper.make_node("Add", ["h", "t2"], ["t3"]), helper.make_node("Mul", ["t3", "k"], ["t4"]),
                helper.make_node("Tanh", ["t4"], ["t5"]), helper.make_node("Add", ["t5", "one"], ["t6"]),
                helper.make_node("Mul", ["h", "half"], ["t7"]), helper.make_node("Mul", ["t7", "t6"], ["y"])]
        out.append(model(f"gemm_transB_alpha_beta_tanh_op{opset}", opset,
                         [helper.make_node("Gemm", ["x", "Wt", "b8"], ["h"], transB=1, alpha=0.5, beta=2.0)] + tanh,
                         [("x", [6, D])], ["y"],
                         [Wt, b8, const("three", 3.0), const("c", 0.044715), const("k", 0.7978846), const("one", 1.0),
                          const("half", 0.5)], "FusedMatMul"))
        # BERT's pooler: Gemm(transB) + Tanh (TorchScript), MatMul + Add + Tanh (dynamo).
        out.append(model(f"gemm_transB_tanh_op{opset}", opset,
                         [helper.make_node("Gemm", ["x", "Wt", "b8"], ["h"], transB=1),
                          helper.make_node("Tanh", ["h"], ["y"])], [("x", [6, D])], ["y"], [Wt, b8], "FusedMatMul"))
        out.append(model(f"mm_bias_tanh_op{opset}", opset,
                         [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Add", ["p", "b8"], ["h"]),
                          helper.make_node("Tanh", ["h"], ["y"])], [("x", [2, 3, D])], ["y"], [W, b8], "FusedMatMul"))
        if opset >= 17:  # LayerNormalization -> Linear -> Tanh: LayerNormLinear with activation tanh
            out.append(model(f"lnl_tanh_op{opset}", opset,
                             [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["n"], axis=-1,
                                               epsilon=1e-5),
                              helper.make_node("MatMul", ["n", "W"], ["p"]), helper.make_node("Add", ["p", "b8"], ["h"]),
                              helper.make_node("Tanh", ["h"], ["y"])], [("x", [2, 3, D])], ["y"], common + [W, b8],
                             ("LayerNormLinear", PASSES + ",LayerNormLinear")))
        # Squared ReLU (Nemotron: MatMul + Relu + Pow 2; Persimmon: + bias; Mul(r, r) elsewhere).
        sq_pow = [helper.make_node("Relu", ["h"], ["r"]), helper.make_node("Pow", ["r", "two"], ["y"])]
        sq_mul = [helper.make_node("Relu", ["h"], ["r"]), helper.make_node("Mul", ["r", "r"], ["y"])]
        out.append(model(f"mm_relu2_pow_op{opset}", opset, [helper.make_node("MatMul", ["x", "W"], ["h"])] + sq_pow,
                         [("x", [2, 3, D])], ["y"], [W, const("two", 2.0)], "FusedMatMul"))
        out.append(model(f"mm_bias_relu2_mul_op{opset}", opset,
                         [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Add", ["p", "b8"], ["h"])]
                         + sq_mul, [("x", [2, 3, D])], ["y"], [W, b8], "FusedMatMul"))
        out.append(model(f"gemm_transB_alpha_relu2_op{opset}", opset,
                         [helper.make_node("Gemm", ["x", "Wt", "b8"], ["h"], transB=1, alpha=0.5)] + sq_pow,
                         [("x", [6, D])], ["y"], [Wt, b8, const("two", 2.0)], "FusedMatMul"))
        if opset >= 17:  # LayerNormalization -> Linear -> squared ReLU: LayerNormLinear with activation relu2
            out.append(model(f"lnl_relu2_op{opset}", opset,
                             [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["n"], axis=-1,
                                               epsilon=1e-5),
                              helper.make_node("MatMul", ["n", "W"], ["p"]), helper.make_node("Add", ["p", "b8"], ["h"])]
                             + sq_pow, [("x", [2, 3, D])], ["y"], common + [W, b8],
                             ("LayerNormLinear", PASSES + ",LayerNormLinear")))
        # CLIP's QuickGELU x * sigmoid(1.702 x) and a plain SiLU x * sigmoid(x) after a linear layer.
        qg = [helper.make_node("Mul", ["h", "k1702"], ["s"]), helper.make_node("Sigmoid", ["s"], ["g"]),
              helper.make_node("Mul", ["h", "g"], ["y"])]
        out.append(model(f"mm_bias_quick_gelu_op{opset}", opset,
                         [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Add", ["p", "b8"], ["h"])]
                         + qg, [("x", [2, 3, D])], ["y"], [W, b8, const("k1702", 1.702)], "FusedMatMul"))
        out.append(model(f"gemm_transB_silu_op{opset}", opset,
                         [helper.make_node("Gemm", ["x", "Wt", "b8"], ["h"], transB=1),
                          helper.make_node("Sigmoid", ["h"], ["g"]), helper.make_node("Mul", ["g", "h"], ["y"])],
                         [("x", [6, D])], ["y"], [Wt, b8], "FusedMatMul"))
        if opset >= 17:  # CLIP's pre-norm MLP: LayerNormalization -> Linear -> QuickGELU: LayerNormLinear
            out.append(model(f"lnl_quick_gelu_op{opset}", opset,
                             [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["n"], axis=-1,
                                               epsilon=1e-5),
                              helper.make_node("MatMul", ["n", "W"], ["p"]), helper.make_node("Add", ["p", "b8"], ["h"])]
                             + qg, [("x", [2, 3, D])], ["y"], common + [W, b8, const("k1702", 1.702)],
                             ("LayerNormLinear", PASSES + ",LayerNormLinear")))
        out.append(model(f"mm_relu_op{opset}", opset,
                         [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Add", ["b8", "p"], ["h"]),
                          helper.make_node("Relu", ["h"], ["y"])], [("x", [2, 3, D])], ["y"], [W, b8], "FusedMatMul"))
        # Pre-LN residual (ResidualMatMul): out-projection + bias, + residual r, the Sum read on.
        RES = PASSES + ",LayerNormLinear,ResidualMatMul"
        Wdd = const("Wdd", rng.standard_normal((D, D)))
        bd = const("bd", rng.standard_normal(D))
        proj = [helper.make_node("MatMul", ["a", "Wdd"], ["pa"]), helper.make_node("Add", ["pa", "bd"], ["o"]),
                helper.make_node("Add", ["o", "r"], ["s"])]
        goes_on = [helper.make_node("Mul", ["s", "half"], ["z"])]  # the residual stream read later
        ab = [("a", [2, 3, D]), ("r", [2, 3, D])]
        out.append(model(f"resmm_lnl_op{opset}", opset,
                         proj + ln_nodes("s", "n", opset) + [helper.make_node("MatMul", ["n", "W"], ["q"]),
                                                              helper.make_node("Add", ["q", "b8"], ["y"])] + goes_on,
                         ab, ["y", "z"], common + [Wdd, bd, W, b8, const("half", 0.5)],
                         ("FusedMatMul", RES)))
        # GPT-2's Conv1D: Gemm on the [-1, D] view, Reshape back, then the residual Add.
        view = [helper.make_node("Reshape", ["a", "flat"], ["a2"]), helper.make_node("Gemm", ["a2", "Wdd", "bd"], ["g2"]),
                helper.make_node("Reshape", ["g2", "unflat"], ["o"]), helper.make_node("Add", ["r", "o"], ["s"])]
        out.append(model(f"resmm_gpt2_view_op{opset}", opset,
                         view + ln_nodes("s", "n", opset) + [helper.make_node("MatMul", ["n", "W"], ["q"]),
                                                             helper.make_node("Add", ["q", "b8"], ["y"])] + goes_on,
                         ab, ["y", "z"],
                         common + [Wdd, bd, W, b8, const("half", 0.5),
                                   numpy_helper.from_array(np.array([-1, D], np.int64), "flat"),
                                   numpy_helper.from_array(np.array([2, 3, D], np.int64), "unflat")],
                         ("FusedMatMul", RES)))
        # SkipLayerNorm with its Sum read and its Y a graph output: the plain norm remains.
        out.append(model(f"resmm_sln_op{opset}", opset, proj + ln_nodes("s", "y", opset) + goes_on, ab, ["y", "z"],
                         common + [Wdd, bd, const("half", 0.5)],
                         ("LayerNorm" if opset < 17 else "LayerNormalization", RES)))
        out.append(model(f"resmm_rms_op{opset}", opset, proj + rms_nodes("s", "y", opset) + goes_on, ab, ["y", "z"],
                         common + [Wdd, bd, const("half", 0.5)], ("RMSNorm", RES)))
        out.append(model(f"addrelu_op{opset}", opset,
                         [helper.make_node("Add", ["x", "skip"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
                         [("x", [2, 3, D]), ("skip", [2, 3, D])], ["y"], [], "AddRelu"))
        out.append(model(f"convbn_op{opset}", opset,
                         [helper.make_node("Conv", ["img", "cw", "cb"], ["c"], pads=[1, 1, 1, 1]),
                          helper.make_node("BatchNormalization", ["c", "bs", "bb", "bm", "bv"], ["y"], epsilon=1e-3)],
                         [("img", [2, 3, 6, 6])], ["y"],
                         [const("cw", rng.standard_normal((4, 3, 3, 3))), const("cb", rng.standard_normal(4)),
                          const("bs", rng.uniform(0.5, 2, 4)), const("bb", rng.standard_normal(4)),
                          const("bm", rng.standard_normal(4)), const("bv", rng.uniform(0.1, 2, 4))], "Conv"))
    # Before opset 15 (no CastLike) the bodies Cast their float constants to the
    # element type: double models exercise that path.
    for opset in (14, 17):
        out.append(model(f"ln_double_op{opset}", opset, ln_nodes("x", "y", opset), [("x", [2, 3, D])], ["y"], common,
                         "LayerNorm" if opset < 17 else "LayerNormalization", np.float64))
        nodes = [helper.make_node("Add", ["x", "skip"], ["s"])] + rms_nodes("s", "y", opset)
        out.append(model(f"skiprms_double_op{opset}", opset, nodes, [("x", [2, 3, D]), ("skip", [2, 3, D])], ["y"],
                         common, "SkipLayerNorm", np.float64))
        out.append(model(f"rms_double_op{opset}", opset, rms_nodes("x", "y", opset), [("x", [2, 3, D])], ["y"],
                         common, "RMSNorm", np.float64))
    return out


def main():
    args = lib.parse_args()
    onnx, ort, np = lib.require("onnx", "onnxruntime", "numpy")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, m, feeds, expect in build_models():
            if args.k not in name:
                continue
            src = os.path.join(tmp, name + ".onnx")
            dst = os.path.join(tmp, name + ".opt.onnx")
            onnx.save(m, src)
            expect, passes = expect if isinstance(expect, tuple) else (expect, PASSES)
            r = lib.run_fuseopt(args.bin, src, dst, "-q", "--passes", passes)
            if r.returncode != 0:
                failures.append(f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()}")
                continue
            opt = onnx.load(dst)
            ops = [n.op_type for n in opt.graph.node]
            if expect not in ops or (expect == "Conv" and "BatchNormalization" in ops):
                failures.append(f"{name}: expected {expect} in the optimized graph, got {ops}")
            if name.startswith("resmm") and not any(n.op_type == "FusedMatMul" and len(n.input) == 4
                                                    for n in opt.graph.node):
                failures.append(f"{name}: no FusedMatMul with a residual input: {ops}")
            if name.startswith("resmm") and any(n.op_type in ("SkipLayerNorm", "Add") for n in opt.graph.node):
                failures.append(f"{name}: a residual Add or SkipLayerNorm is left: {ops}")
            if "relu2" in name and any(op in ops for op in ("Relu", "Pow", "Mul")):
                failures.append(f"{name}: the squared ReLU was not folded: {ops}")
            if ("quick_gelu" in name or "silu" in name) and any(op in ops for op in ("Sigmoid", "Mul")):
                failures.append(f"{name}: the sigmoid gate was not folded: {ops}")
            try:
                onnx.checker.check_model(dst, full_check=True)
            except Exception as e:  # noqa: BLE001
                failures.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
            names = [i.name for i in m.graph.input]
            try:
                want = lib.run_ort(src, [feeds[n] for n in names])
                got = lib.run_ort(dst, [feeds[n] for n in names])
            except Exception as e:  # noqa: BLE001
                failures.append(f"{name}: onnxruntime failed: {str(e).splitlines()[0]}")
                continue
            for i, (g, w) in enumerate(zip(got, want)):
                why = lib.compare(g, w, 1e-4, 1e-4)
                if why:
                    failures.append(f"{name}: output {i}: {why}")
            print(("FAIL " if any(f.startswith(name + ":") for f in failures) else "ok   ") + f"{name}: {ops}")
    for f in failures:
        print("FAIL", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
