"""fuseopt.FusedMatMulLayerNorm end to end, with ONNX Runtime as the oracle (issue 15).

BERT-family masked-LM heads written here in the exporters' primitives (input ids ->
word-embedding Gather -> dense + bias -> GELU -> LayerNorm -> the tied decoder GEMM
over the vocabulary): opsets 14 (LayerNorm from primitives: fuseopt.LayerNorm), 17
(LayerNormalization), 18 (ReduceMean axes as an input) and 20 (the Gelu op), erf and
tanh GELU, TorchScript's MatMul + Add and dynamo's 2-D Gemm view between Reshapes,
with and without the LayerNorm bias. Each is optimized by the full default pipeline;
the result must hold exactly one FusedMatMulLayerNorm (and no LayerNormLinear: the
decoder stays a FusedMatMul), pass onnx.checker (full_check), give ONNX Runtime's
outputs of the original through the function body (1e-4), and give them through
fuserun's CPU kernels (`fuserun --backend cpu --check`). `--emit standard` must write
MatMul + Gelu + LayerNormalization and give the same outputs in ONNX Runtime.

The skip form: post-LN residual blocks written here (dense + bias, the residual Add in
either order, LayerNorm from primitives at opsets 14 and 18 or LayerNormalization at 17, with
and without beta; an out-projection block, then an FFN whose second GEMM feeds the next
residual norm). Each residual norm must become one FusedMatMulLayerNorm with the residual as
its skip input (no SkipLayerNorm left), pass onnx.checker, give ONNX Runtime's outputs of the
original through the function body (1e-4) and through fuserun's CPU kernels. `--emit
standard` keeps the skip variant fuseopt (its body is the standard sequence already) and
must still give the same outputs in ONNX Runtime.

Then the acceptance check on the real exports (models/exported/*_mlm_*, BERT and RoBERTa
masked-LM, TorchScript and dynamo; models/export_heads.py): each head's dense -> GELU ->
LayerNorm is exactly one FusedMatMulLayerNorm, read by the decoder's FusedMatMul, nothing of
it left (no Erf, no LayerNormLinear), every encoder layer's two post-LN residual norms are
FusedMatMulLayerNorm with skip (no SkipLayerNorm left), and the fused model reproduces
test_data_set_0 in ONNX Runtime (1e-4) and with `fuserun --backend cpu --check`."""
import glob
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

H, V, B, S = 32, 50, 2, 5


def build_models():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(15)

    def const(name, arr, dtype=np.float32):
        return numpy_helper.from_array(np.asarray(arr, dtype=dtype), name)

    def reduce_mean(x, out, opset):
        if opset >= 18:
            return [helper.make_node("ReduceMean", [x, "axes"], [out])]
        return [helper.make_node("ReduceMean", [x], [out], axes=[-1])]

    def ln_primitives(x, y, opset, beta):
        n = reduce_mean(x, "ln_mean", opset)
        n += [helper.make_node("Sub", [x, "ln_mean"], ["ln_d"]), helper.make_node("Pow", ["ln_d", "two"], ["ln_sq"])]
        n += reduce_mean("ln_sq", "ln_var", opset)
        n += [helper.make_node("Add", ["ln_var", "eps"], ["ln_ve"]), helper.make_node("Sqrt", ["ln_ve"], ["ln_sd"]),
              helper.make_node("Div", ["ln_d", "ln_sd"], ["ln_n"]),
              helper.make_node("Mul", ["ln_n", "gamma"], ["ln_g" if beta else y])]
        if beta:
            n.append(helper.make_node("Add", ["ln_g", "beta"], [y]))
        return n

    def gelu(x, y, form, opset):
        if form == "op":
            return [helper.make_node("Gelu", [x], [y])]
        if form == "op_tanh":
            return [helper.make_node("Gelu", [x], [y], approximate="tanh")]
        if form == "erf":  # BERT TorchScript: x * 0.5 * (1 + erf(x / sqrt(2)))
            return [helper.make_node("Div", [x, "sqrt2"], ["g1"]), helper.make_node("Erf", ["g1"], ["g2"]),
                    helper.make_node("Add", ["g2", "one"], ["g3"]), helper.make_node("Mul", [x, "g3"], ["g4"]),
                    helper.make_node("Mul", ["g4", "half"], [y])]
        # tanh (ELECTRA's gelu_new / GPT-2 spelling)
        return [helper.make_node("Pow", [x, "three"], ["t1"]), helper.make_node("Mul", ["t1", "c"], ["t2"]),
                helper.make_node("Add", [x, "t2"], ["t3"]), helper.make_node("Mul", ["t3", "k"], ["t4"]),
                helper.make_node("Tanh", ["t4"], ["t5"]), helper.make_node("Add", ["t5", "one"], ["t6"]),
                helper.make_node("Mul", [x, "half"], ["t7"]), helper.make_node("Mul", ["t7", "t6"], [y])]

    def mlm_head(name, opset, form, dense="matmul", ln="primitives", beta=True):
        emb = rng.standard_normal((V, H)) * 0.5
        inits = [const("word_embeddings", emb), const("dense_w", rng.standard_normal((H, H)) / np.sqrt(H)),
                 const("dense_wt", rng.standard_normal((H, H)) / np.sqrt(H)),
                 const("dense_b", rng.standard_normal(H) * 0.1), const("gamma", rng.uniform(0.5, 1.5, H)),
                 const("beta", rng.standard_normal(H) * 0.1), const("decoder_b", rng.standard_normal(V) * 0.1),
                 const("two", 2.0), const("eps", 1e-12), const("sqrt2", 1.4142135), const("one", 1.0),
                 const("half", 0.5), const("three", 3.0), const("c", 0.044715), const("k", 0.7978846),
                 const("axes", [-1], np.int64), const("flat", [-1, H], np.int64),
                 const("back", [B, S, H], np.int64)]
        nodes = [helper.make_node("Gather", ["word_embeddings", "ids"], ["hidden"])]
        if dense == "matmul":  # TorchScript: MatMul + Add on [B, S, H]
            nodes += [helper.make_node("MatMul", ["hidden", "dense_w"], ["dm"]),
                      helper.make_node("Add", ["dm", "dense_b"], ["h"])]
        else:  # dynamo's linear on a 2-D view: Reshape, Gemm(transB), Reshape back
            nodes += [helper.make_node("Reshape", ["hidden", "flat"], ["hidden2"]),
                      helper.make_node("Gemm", ["hidden2", "dense_wt", "dense_b"], ["h2"], transB=1),
                      helper.make_node("Reshape", ["h2", "back"], ["h"])]
        nodes += gelu("h", "g", form, opset)
        if ln == "primitives":
            nodes += ln_primitives("g", "t", opset, beta)
        else:
            nodes.append(helper.make_node("LayerNormalization", ["g", "gamma"] + (["beta"] if beta else []), ["t"],
                                          axis=-1, epsilon=1e-12))
        # The decoder reads the word-embedding table (tied weights) through a Transpose.
        nodes += [helper.make_node("Transpose", ["word_embeddings"], ["emb_t"], perm=[1, 0]),
                  helper.make_node("MatMul", ["t", "emb_t"], ["logits0"]),
                  helper.make_node("Add", ["logits0", "decoder_b"], ["logits"])]
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("ids", TensorProto.INT64, [B, S])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, S, V])], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8 if opset < 20 else 9
        ids = rng.integers(0, V, (B, S)).astype(np.int64)
        return name, m, ids

    out = []
    for opset in (14, 17, 18):
        for form in ("erf", "tanh"):
            out.append(mlm_head(f"mlm_op{opset}_{form}", opset, form))
    out.append(mlm_head("mlm_op14_erf_nobeta", 14, "erf", beta=False))
    out.append(mlm_head("mlm_op18_erf_gemm_view", 18, "erf", dense="gemm"))
    out.append(mlm_head("mlm_op17_tanh_layernormalization", 17, "tanh", ln="op"))
    out.append(mlm_head("mlm_op20_gelu_op", 20, "op", ln="op"))
    out.append(mlm_head("mlm_op20_gelu_op_tanh_gemm_view", 20, "op_tanh", dense="gemm", ln="op", beta=False))
    return out


def ops_of(path):
    import onnx
    return [n.op_type for n in onnx.load(path).graph.node]


def check_ort(name, src, dst, ids, failures):
    """ONNX Runtime's outputs of the original (None if it failed); differences go to failures."""
    try:
        want = lib.run_ort(src, [ids])
        got = lib.run_ort(dst, [ids])
    except Exception as e:  # noqa: BLE001
        failures.append(f"{name}: onnxruntime failed: {str(e).splitlines()[0]}")
        return None
    for i, (g, w) in enumerate(zip(got, want)):
        why = lib.compare(g, w, 1e-4, 1e-4)
        if why:
            failures.append(f"{name}: output {i}: {why}")
    return want


def write_test_data(model_dir, ids, outputs, names=("ids", "logits")):
    from onnx import numpy_helper
    d = os.path.join(model_dir, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(ids, names[0]).SerializeToString())
    for i, o in enumerate(outputs):
        with open(os.path.join(d, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(o, names[1]).SerializeToString())


def build_post_ln_models():
    """Post-LN encoder tails: x -> LN(x + dense1(x)) = t -> LN(t + dense3(gelu(dense2(t))))."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(16)
    F = 48  # the FFN's inner width

    def const(name, arr, dtype=np.float32):
        return numpy_helper.from_array(np.asarray(arr, dtype=dtype), name)

    def norm(x, y, i, opset, beta):
        g, b = f"gamma{i}", f"beta{i}"
        if opset == 17:
            return [helper.make_node("LayerNormalization", [x, g] + ([b] if beta else []), [y], axis=-1,
                                     epsilon=1e-12)]

        def mean(v, out):
            if opset >= 18:
                return [helper.make_node("ReduceMean", [v, "axes"], [out])]
            return [helper.make_node("ReduceMean", [v], [out], axes=[-1])]
        p = f"ln{i}_"
        n = mean(x, p + "mean")
        n += [helper.make_node("Sub", [x, p + "mean"], [p + "d"]), helper.make_node("Pow", [p + "d", "two"], [p + "sq"])]
        n += mean(p + "sq", p + "var")
        n += [helper.make_node("Add", [p + "var", "eps"], [p + "ve"]), helper.make_node("Sqrt", [p + "ve"], [p + "sd"]),
              helper.make_node("Div", [p + "d", p + "sd"], [p + "n"]),
              helper.make_node("Mul", [p + "n", g], [p + "g" if beta else y])]
        if beta:
            n.append(helper.make_node("Add", [p + "g", b], [y]))
        return n

    def model(name, opset, swap, beta):
        inits = [const("w1", rng.standard_normal((H, H)) / np.sqrt(H)), const("b1", rng.standard_normal(H) * 0.1),
                 const("w2", rng.standard_normal((H, F)) / np.sqrt(H)), const("b2", rng.standard_normal(F) * 0.1),
                 const("w3", rng.standard_normal((F, H)) / np.sqrt(F)), const("b3", rng.standard_normal(H) * 0.1),
                 const("two", 2.0), const("eps", 1e-12), const("sqrt2", 1.4142135), const("one", 1.0),
                 const("half", 0.5), const("axes", [-1], np.int64)]
        for i in (1, 2):
            inits += [const(f"gamma{i}", rng.uniform(0.5, 1.5, H)), const(f"beta{i}", rng.standard_normal(H) * 0.1)]

        def residual(h, r, out):  # TorchScript writes hidden + residual; the order varies between exports
            return helper.make_node("Add", [r, h] if swap else [h, r], [out])
        nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["d1"]),
                 residual("d1", "x", "s1")]
        nodes += norm("s1", "t", 1, opset, beta)
        nodes += [helper.make_node("MatMul", ["t", "w2"], ["m2"]), helper.make_node("Add", ["m2", "b2"], ["d2"]),
                  helper.make_node("Div", ["d2", "sqrt2"], ["g1"]), helper.make_node("Erf", ["g1"], ["g2"]),
                  helper.make_node("Add", ["g2", "one"], ["g3"]), helper.make_node("Mul", ["d2", "g3"], ["g4"]),
                  helper.make_node("Mul", ["g4", "half"], ["g5"]),
                  helper.make_node("MatMul", ["g5", "w3"], ["m3"]), helper.make_node("Add", ["m3", "b3"], ["d3"]),
                  residual("d3", "t", "s2")]
        nodes += norm("s2", "y", 2, opset, beta)
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", H])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", H])], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return name, m, rng.standard_normal((B, S, H)).astype(np.float32)

    return [model(f"postln_op{opset}{'_swapped' if swap else ''}{'' if beta else '_nobeta'}", opset, swap, beta)
            for opset, swap, beta in ((14, False, True), (17, True, True), (17, False, False), (18, True, False))]


def save_and_optimize(args, tmp, name, m, failures):
    """Saves m as tmp/name/model.onnx and runs fuseopt on it; (model_dir, src, dst), or None with
    the failure recorded."""
    import onnx
    model_dir = os.path.join(tmp, name)
    os.makedirs(model_dir)
    src = os.path.join(model_dir, "model.onnx")
    dst = os.path.join(tmp, name + ".opt.onnx")
    onnx.save(m, src)
    r = lib.run_fuseopt(args.bin, src, dst, "-q")
    if r.returncode != 0:
        failures.append(f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()}")
        return None
    return model_dir, src, dst


def check_post_ln(args, tmp, failures):
    import onnx
    for name, m, x in build_post_ln_models():
        if args.k not in name:
            continue
        saved = save_and_optimize(args, tmp, name, m, failures)
        if saved is None:
            continue
        model_dir, src, dst = saved
        g = onnx.load(dst).graph
        ops = [n.op_type for n in g.node]
        skips = [n.input[5] for n in g.node if n.op_type == "FusedMatMulLayerNorm" and len(n.input) > 5]
        # The residual of the first norm is x; of the second, the first norm's output.
        first = [n.output[0] for n in g.node if n.op_type == "FusedMatMulLayerNorm" and n.input[5:] == ["x"]]
        if sorted(ops) != ["FusedMatMul", "FusedMatMulLayerNorm", "FusedMatMulLayerNorm"] or len(skips) != 2 or \
                len(first) != 1 or sorted(skips) != sorted(["x", first[0]]):
            failures.append(f"{name}: want FusedMatMul (the GELU FFN GEMM) and two FusedMatMulLayerNorm with skip "
                            f"x and the first norm's output; got {ops}, skip inputs {skips}")
        try:
            onnx.checker.check_model(dst, full_check=True)
        except Exception as e:  # noqa: BLE001
            failures.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
        want = check_ort(name, src, dst, x, failures)
        if want is not None:
            write_test_data(model_dir, x, want, ("x", "y"))
            failures += lib.fuserun_cpu_failures(args.bin, name, dst, model_dir)
        std = os.path.join(tmp, name + ".std.onnx")
        r = lib.run_fuseopt(args.bin, src, std, "-q", "--emit", "standard")
        if r.returncode != 0:
            failures.append(f"{name}: fuseopt --emit standard exit {r.returncode}: {r.stderr.strip()}")
        else:
            sops = ops_of(std)
            if sops.count("FusedMatMulLayerNorm") != 2 or "Gelu" not in sops:
                failures.append(f"{name}: --emit standard wrote {sops}")
            check_ort(name + " (--emit standard)", src, std, x, failures)
        print(("FAIL " if any(f.startswith(name) for f in failures) else "ok   ") + f"{name}: {ops}")


def check_real_mlm_heads(args, tmp, failures):
    import onnx
    dirs = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(args.src, "models", "exported", "*_mlm_*",
                                                                      "model.onnx")))
    if not dirs:
        failures.append("no models/exported/*_mlm_* export found (models/export_heads.py writes them)")
    for d in dirs:
        name = os.path.basename(d)
        if args.k not in name:
            continue
        dst = os.path.join(tmp, name + ".real.onnx")
        r = lib.run_fuseopt(args.bin, os.path.join(d, "model.onnx"), dst, "-q")
        if r.returncode != 0:
            failures.append(f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()}")
            continue
        g = onnx.load(dst, load_external_data=False).graph
        ops = [n.op_type for n in g.node]
        fused = [n for n in g.node if n.op_type == "FusedMatMulLayerNorm"]
        head = [n for n in fused if len(n.input) < 6 or not n.input[5]]
        # Post-LN encoder layers: the out-projection and the second FFN GEMM each take their residual norm.
        with_skip = len(fused) - len(head)
        readers = [n for n in g.node if head and head[0].output[0] in n.input]
        if len(head) != 1 or "LayerNormLinear" in ops or "Erf" in ops:
            failures.append(f"{name}: want one FusedMatMulLayerNorm without skip, no LayerNormLinear or Erf; got {ops}")
        elif "SkipLayerNorm" in ops or with_skip != 2 * ops.count("Attention"):
            failures.append(f"{name}: want two FusedMatMulLayerNorm with skip per attention layer and no "
                            f"SkipLayerNorm; got {ops}")
        elif [n.op_type for n in readers] != ["FusedMatMul"]:
            failures.append(f"{name}: the head's LayerNorm output is read by {[n.op_type for n in readers]}, "
                            "not the decoder FusedMatMul alone")
        failures += lib.ort_failures(name, dst, d, 1e-4, 1e-4)
        failures += lib.fuserun_cpu_failures(args.bin, name, dst, d)
        print(("FAIL " if any(f.startswith(name) for f in failures) else "ok   ") + f"{name} (real export)")


def main():
    args = lib.parse_args()
    onnx, ort, np = lib.require("onnx", "onnxruntime", "numpy")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, m, ids in build_models():
            if args.k not in name:
                continue
            saved = save_and_optimize(args, tmp, name, m, failures)
            if saved is None:
                continue
            model_dir, src, dst = saved
            ops = ops_of(dst)
            if ops.count("FusedMatMulLayerNorm") != 1 or "LayerNormLinear" in ops:
                failures.append(f"{name}: expected one FusedMatMulLayerNorm and no LayerNormLinear, got {ops}")
            for left in ("Erf", "Tanh", "Gelu", "LayerNormalization", "LayerNorm", "ReduceMean"):
                if left in ops:
                    failures.append(f"{name}: {left} left in the optimized graph: {ops}")
            try:
                onnx.checker.check_model(dst, full_check=True)
            except Exception as e:  # noqa: BLE001
                failures.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
            want = check_ort(name, src, dst, ids, failures)
            if want is not None:
                write_test_data(model_dir, ids, want)
                failures += lib.fuserun_cpu_failures(args.bin, name, dst, model_dir)
            # --emit standard: the standard ops where exact.
            std = os.path.join(tmp, name + ".std.onnx")
            r = lib.run_fuseopt(args.bin, src, std, "-q", "--emit", "standard")
            if r.returncode != 0:
                failures.append(f"{name}: fuseopt --emit standard exit {r.returncode}: {r.stderr.strip()}")
            else:
                sops = ops_of(std)
                if "FusedMatMulLayerNorm" in sops or "Gelu" not in sops or "LayerNormalization" not in sops:
                    failures.append(f"{name}: --emit standard wrote {sops}")
                check_ort(name + " (--emit standard)", src, std, ids, failures)
            print(("FAIL " if any(f.startswith(name) for f in failures) else "ok   ") + f"{name}: {ops}")
        check_post_ln(args, tmp, failures)
        check_real_mlm_heads(args, tmp, failures)
    for f in failures:
        print("FAIL", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
