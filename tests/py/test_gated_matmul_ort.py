"""fuseopt.GatedMatMul end to end on small gated MLPs written here in primitives
(SwiGLU with x*Sigmoid(x) in both orders, ReGLU, erf GeGLU, tanh GeGLU as Gemma's
TorchScript export writes it; no bias, both biases, gate bias only; opsets 14, 17, 18;
float64 models for the pre-CastLike body path; Phi-3's packed gate_up GEMM halved by a
Split or by two Slices). For each: fuseopt (the default passes)
must produce exactly one GatedMatMul and no MatMul; the result must pass
onnx.checker (full_check); ONNX Runtime running the function body must reproduce
ONNX Runtime on the original (1e-4); and for float32, `fuserun --backend cpu --check`
(fuseopt's own CPU kernel) must reproduce the same reference. A negative model (gate
and up of different widths) must keep its MatMuls."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

K, N = 16, 12


def build_models():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)

    def c(name, arr):
        return numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name)

    def act_nodes(kind):
        """act(g) -> 'ag', written the way exporters write it."""
        if kind == "silu":
            return [helper.make_node("Sigmoid", ["g"], ["sg"]), helper.make_node("Mul", ["g", "sg"], ["ag"])], []
        if kind == "silu_sig_first":
            return [helper.make_node("Sigmoid", ["g"], ["sg"]), helper.make_node("Mul", ["sg", "g"], ["ag"])], []
        if kind == "relu":
            return [helper.make_node("Relu", ["g"], ["ag"])], []
        if kind == "gelu":
            return ([helper.make_node("Div", ["g", "sqrt2"], ["e1"]), helper.make_node("Erf", ["e1"], ["e2"]),
                     helper.make_node("Add", ["e2", "one"], ["e3"]), helper.make_node("Mul", ["g", "e3"], ["e4"]),
                     helper.make_node("Mul", ["e4", "half"], ["ag"])],
                    [c("sqrt2", 1.4142135), c("one", 1.0), c("half", 0.5)])
        # gelu_tanh (Gemma TorchScript: Mul-cube, constant first)
        return ([helper.make_node("Mul", ["g", "g"], ["t0"]), helper.make_node("Mul", ["t0", "g"], ["t1"]),
                 helper.make_node("Mul", ["cc", "t1"], ["t2"]), helper.make_node("Add", ["g", "t2"], ["t3"]),
                 helper.make_node("Mul", ["k", "t3"], ["t4"]), helper.make_node("Tanh", ["t4"], ["t5"]),
                 helper.make_node("Add", ["one", "t5"], ["t6"]), helper.make_node("Mul", ["g", "t6"], ["t7"]),
                 helper.make_node("Mul", ["half", "t7"], ["ag"])],
                [c("cc", 0.044715), c("k", 0.7978845608), c("one", 1.0), c("half", 0.5)])

    def gated(name, opset, kind, bias, dtype=np.float32, n_up=N):
        nodes = [helper.make_node("MatMul", ["x", "Wg"], ["gp" if bias in ("both", "gate") else "g"]),
                 helper.make_node("MatMul", ["x", "Wu"], ["up" if bias == "both" else "u"])]
        inits = [c("Wg", rng.standard_normal((K, N)) * 0.5), c("Wu", rng.standard_normal((K, n_up)) * 0.5)]
        if bias in ("both", "gate"):
            nodes.append(helper.make_node("Add", ["gp", "bg"], ["g"]))
            inits.append(c("bg", rng.standard_normal(N)))
        if bias == "both":
            nodes.append(helper.make_node("Add", ["bu", "up"], ["u"]))
            inits.append(c("bu", rng.standard_normal(n_up)))
        an, ai = act_nodes(kind)
        nodes += an + [helper.make_node("Mul", ["ag", "u"], ["y"])]
        inits += ai
        et = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
        if dtype != np.float32:
            inits = [numpy_helper.from_array(numpy_helper.to_array(t).astype(dtype), t.name) for t in inits]
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", et, [2, 3, K])],
                              [helper.make_tensor_value_info("y", et, None)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return name, m, {"x": (rng.standard_normal((2, 3, K)) * 1.5).astype(dtype)}

    def packed(name, opset, kind, bias, halves):
        """One [K, 2N] GEMM whose halves are taken by a Split or by two Slices (Phi-3)."""
        nodes = [helper.make_node("MatMul", ["x", "Wp"], ["pp" if bias else "p"])]
        inits = [c("Wp", rng.standard_normal((K, 2 * N)) * 0.5)]
        if bias:
            nodes.append(helper.make_node("Add", ["pp", "bp"], ["p"]))
            inits.append(c("bp", rng.standard_normal(2 * N)))
        i64 = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
        if halves == "split":
            if opset >= 18:
                nodes.append(helper.make_node("Split", ["p"], ["g", "u"], axis=-1, num_outputs=2))
            else:
                nodes.append(helper.make_node("Split", ["p", "sizes"], ["g", "u"], axis=2))
                inits.append(i64("sizes", [N, N]))
        else:
            nodes += [helper.make_node("Slice", ["p", "s0", "e0", "ax"], ["g"]),
                      helper.make_node("Slice", ["p", "s1", "e1", "ax"], ["u"])]
            inits += [i64("s0", [0]), i64("e0", [N]), i64("s1", [N]), i64("e1", [2**63 - 1]), i64("ax", [-1])]
        an, ai = act_nodes(kind)
        nodes += an + [helper.make_node("Mul", ["ag", "u"], ["y"])]
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits + ai)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return name, m, {"x": (rng.standard_normal((2, 3, K)) * 1.5).astype(np.float32)}

    out = []
    for opset in (14, 17, 18):
        for halves in ("split", "slice"):
            for kind in ("silu", "gelu_tanh"):
                for bias in (False, True):
                    out.append((packed(f"packed_{halves}_{kind}_{'bias' if bias else 'nobias'}_op{opset}", opset,
                                       kind, bias, halves), True))
    for opset in (14, 17, 18):
        for kind in ("silu", "silu_sig_first", "relu", "gelu", "gelu_tanh"):
            for bias in ("none", "both", "gate"):
                out.append((gated(f"gated_{kind}_{bias}_op{opset}", opset, kind, bias), True))
    for opset in (14, 17):
        out.append((gated(f"gated_silu_both_double_op{opset}", opset, "silu", "both", np.float64), True))
        out.append((gated(f"gated_gelu_tanh_none_double_op{opset}", opset, "gelu_tanh", "none", np.float64), True))
    out.append((gated("neg_gated_widths_op17", 17, "silu", "none", n_up=1), False))
    return out


def main():
    args = lib.parse_args()
    onnx, ort, np = lib.require("onnx", "onnxruntime", "numpy")
    from onnx import numpy_helper
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for (name, m, feeds), positive in build_models():
            if args.k not in name:
                continue
            src = os.path.join(tmp, name + ".onnx")
            dst = os.path.join(tmp, name + ".opt.onnx")
            onnx.save(m, src)
            r = lib.run_fuseopt(args.bin, src, dst, "-q")
            if r.returncode != 0:
                failures.append(f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()}")
                continue
            opt = onnx.load(dst)
            ops = [n.op_type for n in opt.graph.node]
            if positive and (ops.count("GatedMatMul") != 1 or "MatMul" in ops):
                failures.append(f"{name}: expected one GatedMatMul and no MatMul, got {ops}")
            if not positive and ("GatedMatMul" in ops or "MatMul" not in ops and "FusedMatMul" not in ops):
                failures.append(f"{name}: gate and up of different widths must not fuse, got {ops}")
            try:
                onnx.checker.check_model(dst, full_check=True)
            except Exception as e:  # noqa: BLE001
                failures.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
            try:
                want = lib.run_ort(src, [feeds["x"]])
                got = lib.run_ort(dst, [feeds["x"]])
            except Exception as e:  # noqa: BLE001
                failures.append(f"{name}: onnxruntime failed: {str(e).splitlines()[0]}")
                continue
            why = lib.compare(got[0], want[0], 1e-4, 1e-4)
            if why:
                failures.append(f"{name}: ONNX Runtime on the function body: {why}")
            if feeds["x"].dtype == np.float32:
                # fuseopt's CPU kernel against the same ONNX Runtime reference.
                data = os.path.join(tmp, name + "_data")
                os.makedirs(data)
                for fname, arr in (("input_0.pb", feeds["x"]), ("output_0.pb", want[0])):
                    with open(os.path.join(data, fname), "wb") as f:
                        f.write(numpy_helper.from_array(arr).SerializeToString())
                fr = subprocess.run([os.path.join(args.bin, "fuserun"), dst, "--backend", "cpu", "--check", data],
                                    capture_output=True, text=True, timeout=600)
                if fr.returncode != 0:
                    tail = (fr.stdout + fr.stderr).strip().splitlines()[-3:]
                    failures.append(f"{name}: fuserun --backend cpu --check exit {fr.returncode}: {' | '.join(tail)}")
            print(("FAIL " if any(f.startswith(name + ":") for f in failures) else "ok   ") + f"{name}: {ops}")
    for f in failures:
        print("FAIL", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
