"""Fusion inside If branches (src/pass/subgraph_fusion.h).

1. A synthetic model: an If on a graph input whose branches both read the outer weights
   Wq/Wk/Wv/b through outer scope, Q/K/V projections of one input plus a bias + ReLU GEMM.
   After fuseopt: both branches hold fused ops (QKV packed, FusedMatMul), the packed weight
   the two branches made with the same bytes is ONE outer initializer, the original weights
   no branch reads any more are gone, onnx.checker (full) accepts the model, and ONNX Runtime
   (fuseopt's function bodies) and `fuserun --backend cpu` give the original's outputs for
   both values of the condition.
2. Negative: a branch whose only candidate is refused stays as it was (byte for byte).
3. Optimum's merged decoder (models/exported/optimum_*_merged, an If on use_cache_branch with
   the whole decoder in each branch): every Softmax in the branches becomes a fused Attention,
   outputs equal to the reference (both branches, ONNX Runtime and fuserun).
4. `--fp16` (and `--fp16 --keep-io-types`) on the merged decoders: the branches are converted
   too (float16 weights and values inside them, the If's float outputs float16), onnx.checker
   (full) accepts the model, ONNX Runtime runs both branches within 1e-2 of the fp32 reference.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def branch_nodes(model, op=None):
    """Every node inside If branches (recursively), optionally of one op type."""
    inside = [n for top in model.graph.node for a in top.attribute if a.HasField("g") for n in lib.all_nodes(a.g)]
    return [n for n in inside if op is None or n.op_type == op]


def synthetic(onnx, np, refusable=False):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    D = 16
    inits = [numpy_helper.from_array(rng.standard_normal((D, D)).astype(np.float32), n) for n in ("Wq", "Wk", "Wv", "W1")]
    inits.append(numpy_helper.from_array(rng.standard_normal((D,)).astype(np.float32), "b1"))

    def branch(name, sign):
        nodes = [helper.make_node("MatMul", ["x", w], [f"{name}_{w}"], name=f"{name}_mm_{w}") for w in ("Wq", "Wk", "Wv")]
        nodes.append(helper.make_node("Mul", [f"{name}_Wk", f"{name}_Wv"], [f"{name}_kv"], name=f"{name}_mul"))
        nodes.append(helper.make_node("Add" if sign > 0 else "Sub", [f"{name}_Wq", f"{name}_kv"], [f"{name}_qkv"],
                                      name=f"{name}_comb"))
        nodes.append(helper.make_node("MatMul", [f"{name}_qkv", "W1"], [f"{name}_h"], name=f"{name}_mm1"))
        nodes.append(helper.make_node("Add", [f"{name}_h", "b1"], [f"{name}_hb"], name=f"{name}_add1"))
        nodes.append(helper.make_node("Relu", [f"{name}_hb"], [f"{name}_y"], name=f"{name}_relu"))
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None)])

    if refusable:  # one MatMul whose output is also a branch output: FusedMatMul's rule 1 refuses
        def branch(name, sign):  # noqa: F811
            nodes = [helper.make_node("MatMul", ["x", "W1"], [f"{name}_h"], name=f"{name}_mm"),
                     helper.make_node("Add", [f"{name}_h", "b1"], [f"{name}_y"], name=f"{name}_add")]
            return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None),
                                                       helper.make_tensor_value_info(f"{name}_h", TensorProto.FLOAT, None)])
    outs = ["y"] + (["h"] if refusable else [])
    g = helper.make_graph(
        [helper.make_node("If", ["cond"], outs, name="cache_if", then_branch=branch("then", 1), else_branch=branch("else", -1))],
        "if_model",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5, D])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def run_ort(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


CUDA = {"usable": True}  # cleared by the first CUDA run that finds no device (or a CPU-only build)


def fuserun_check(bin_dir, model, feeds, refs, tmp, tag, backend="cpu", precision="fp32"):
    """fuserun --check against refs (a test_data_set folder written here); (0, ["skipped"]) for
    a CUDA run where there is no usable GPU."""
    from onnx import numpy_helper
    import onnx
    d = os.path.join(tmp, "data_" + tag)
    os.makedirs(d, exist_ok=True)
    m = onnx.load(model, load_external_data=False)
    for i, inp in enumerate(m.graph.input):
        with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[inp.name], inp.name).SerializeToString())
    for i, (o, r) in enumerate(zip(m.graph.output, refs)):
        with open(os.path.join(d, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(r, o.name).SerializeToString())
    r = subprocess.run([os.path.join(bin_dir, "fuserun"), model, "--backend", backend, "--precision", precision,
                        "--check", d], capture_output=True, text=True, timeout=300)
    text = (r.stdout + r.stderr).strip()
    if backend == "cuda" and ("no usable CUDA device" in text or "this build has no cuda backend" in text):
        CUDA["usable"] = False
        return 0, ["skipped"]
    return r.returncode, text.splitlines()[-1:] or [""]


def main():
    args = lib.parse_args()
    onnx, np, _ = lib.require("onnx", "numpy", "onnxruntime")
    failures = []
    expect = lib.expecter(failures)
    with tempfile.TemporaryDirectory() as tmp:
        # 1. synthetic, both branches fuse
        src, out = os.path.join(tmp, "if.onnx"), os.path.join(tmp, "if_fused.onnx")
        onnx.save(synthetic(onnx, np), src)
        r = lib.run_fuseopt(args.bin, src, out)
        expect(r.returncode == 0, f"fuseopt on the If model exits 0 ({r.stderr.strip()[-200:]})")
        if r.returncode == 0:
            m = onnx.load(out)
            ops = [n.op_type for n in branch_nodes(m)]
            expect(ops.count("FusedMatMul") == 2, f"a FusedMatMul in each branch ({ops})")
            expect("Relu" not in ops and ops.count("MatMul") <= 2, f"the bias + ReLU GEMM and QKV MatMuls fused ({ops})")
            inits = {i.name for i in m.graph.initializer}
            packed = [n for n in inits if "packed" in n]
            made = inits - {"W1", "b1"}
            # Both branches made the packed weight and the split sizes: each is one outer initializer.
            expect(len(packed) == 1 and len(made) == 2,
                   f"one outer initializer for each constant both branches made ({sorted(inits)})")
            expect(not ({"Wq", "Wk", "Wv"} & inits), f"the unpacked weights no branch reads are gone ({sorted(inits)})")
            try:
                onnx.checker.check_model(m, full_check=True)
                expect(True, "onnx.checker (full) accepts the fused If model")
            except Exception as e:  # noqa: BLE001
                expect(False, f"onnx.checker: {str(e).splitlines()[0]}")
            x = np.random.default_rng(1).standard_normal((2, 5, 16)).astype(np.float32)
            for c in (True, False):
                feeds = {"cond": np.array(c), "x": x}
                want = run_ort(src, feeds)
                got = run_ort(out, feeds)
                err = float(np.abs(got[0] - want[0]).max() / np.abs(want[0]).max())
                expect(err < 1e-5, f"cond={c}: ONNX Runtime on the fused model matches (rel {err:.1e})")
                rc, tail = fuserun_check(args.bin, out, feeds, want, tmp, f"syn{int(c)}")
                expect(rc == 0, f"cond={c}: fuserun --backend cpu --check passes ({tail[0][:200]})")

        # 2. negative: the refused candidate leaves the branches as they were
        src2, out2 = os.path.join(tmp, "if2.onnx"), os.path.join(tmp, "if2_fused.onnx")
        model2 = synthetic(onnx, np, refusable=True)
        onnx.save(model2, src2)
        r = lib.run_fuseopt(args.bin, src2, out2, "-v")
        expect(r.returncode == 0, "fuseopt on the refused If model exits 0")
        if r.returncode == 0:
            m2 = onnx.load(out2)
            ops2 = [n.op_type for n in branch_nodes(m2)]
            expect(ops2.count("MatMul") == 2 and "FusedMatMul" not in ops2, f"nothing fused in the branches ({ops2})")
            expect("is also" in r.stdout + r.stderr or "rule 1" in r.stdout + r.stderr,
                   "the report names the branch's rejection")

        # 3. Optimum's merged decoders
        merged = lib.model_dirs(args.src, "_merged")
        expect(bool(merged), "an Optimum merged decoder is in models/exported")
        for d in merged:
            name = os.path.basename(d)
            src3, out3 = os.path.join(d, "model.onnx"), os.path.join(tmp, name + ".onnx")
            r = lib.run_fuseopt(args.bin, src3, out3)
            if not expect(r.returncode == 0, f"{name}: fuseopt exits 0 ({r.stderr.strip()[-200:]})"):
                continue
            orig, m3 = onnx.load(src3), onnx.load(out3)
            n_soft = len(branch_nodes(orig, "Softmax"))
            attn = [n for n in branch_nodes(m3, "Attention") if n.domain == "fuseopt"]
            expect(n_soft > 0 and len(attn) == n_soft and not branch_nodes(m3, "Softmax"),
                   f"{name}: {len(attn)} fused Attention in the branches for {n_soft} Softmax")
            try:
                onnx.checker.check_model(m3, full_check=True)
                expect(True, f"{name}: onnx.checker (full) accepts the fused model")
            except Exception as e:  # noqa: BLE001
                expect(False, f"{name}: onnx.checker: {str(e).splitlines()[0]}")
            expect(os.path.getsize(out3) < 1.3 * os.path.getsize(src3),
                   f"{name}: no weight copies ({os.path.getsize(out3)} vs {os.path.getsize(src3)} bytes)")
            data = os.path.join(d, "test_data_set_0")
            inputs = [numpy_tensor(p) for p in lib.data_files(data, "input")]
            feeds = {i.name: v for i, v in zip(orig.graph.input, inputs)}
            for use_cache in (False, True):
                if "use_cache_branch" in feeds:
                    feeds = dict(feeds, use_cache_branch=np.array([use_cache]))
                want = run_ort(src3, feeds)
                got = run_ort(out3, feeds)
                err = max(rel_err(np, g, w) for g, w in zip(got, want))
                expect(err < 1e-4, f"{name} use_cache_branch={use_cache}: ONNX Runtime matches (rel {err:.1e})")
                rc, tail = fuserun_check(args.bin, out3, feeds, want, tmp, f"{name}{int(use_cache)}")
                expect(rc == 0, f"{name} use_cache_branch={use_cache}: fuserun --backend cpu --check ({tail[0][:200]})")
                for prec in ("fp32", "fp16"):  # where a GPU is usable: the branches' fused ops on CUDA
                    if not CUDA["usable"]:
                        break
                    rc, tail = fuserun_check(args.bin, out3, feeds, want, tmp, f"{name}{int(use_cache)}", "cuda", prec)
                    if CUDA["usable"]:
                        expect(rc == 0, f"{name} use_cache_branch={use_cache}: fuserun --backend cuda --precision {prec} "
                                        f"--check ({tail[0][:200]})")
            # 4. --fp16 converts the branches too
            for keep in (False, True):
                flags = ["--fp16"] + (["--keep-io-types"] if keep else [])
                what = f"{name} {' '.join(flags)}"
                out16 = os.path.join(tmp, name + ("_keep" if keep else "") + ".fp16.onnx")
                r = lib.run_fuseopt(args.bin, src3, out16, "-q", *flags)
                if not expect(r.returncode == 0, f"{what} exits 0 ({r.stderr.strip()[-300:]})"):
                    continue
                m16 = onnx.load(out16)
                try:
                    onnx.checker.check_model(m16, full_check=True)
                    expect(True, f"{what}: onnx.checker (full) accepts it")
                except Exception as e:  # noqa: BLE001
                    expect(False, f"{what}: onnx.checker: {str(e).splitlines()[0]}")
                inside = [t for top in m16.graph.node for a in top.attribute if a.HasField("g")
                          for t in a.g.initializer if t.data_type in (1, 10) and len(t.dims) >= 2]
                outer = [t for t in m16.graph.initializer if t.data_type in (1, 10) and len(t.dims) >= 2]
                expect(all(t.data_type == 10 for t in inside + outer) and (inside or outer),
                       f"{what}: every float weight (outer and in the branches) is float16")
                io_types = {i.name: i.type.tensor_type.elem_type for i in m16.graph.input}
                for use_cache in (False, True):
                    f16 = dict(feeds, use_cache_branch=np.array([use_cache])) if "use_cache_branch" in feeds else dict(feeds)
                    want = run_ort(src3, f16)
                    f16 = {k: (v.astype(np.float16) if io_types.get(k) == 10 else v) for k, v in f16.items()}
                    try:
                        got = run_ort(out16, f16)
                    except Exception as e:  # noqa: BLE001
                        expect(False, f"{what} use_cache_branch={use_cache}: ONNX Runtime: {str(e).splitlines()[0]}")
                        continue
                    errs = [float(np.linalg.norm(g.astype(np.float64) - w) / max(np.linalg.norm(w), 1e-30))
                            for g, w in zip(got, want) if w.size]
                    expect(max(errs) < 1e-2, f"{what} use_cache_branch={use_cache}: ONNX Runtime within 1e-2 of fp32 "
                                             f"(worst {max(errs):.1e})")
    print(f"{len(failures)} failures" + ("" if CUDA["usable"] else " (no usable GPU: CUDA runs skipped)"))
    return 1 if failures else 0


def rel_err(np, got, want):
    """Max abs difference over the reference's max (0 for two empty tensors of one shape)."""
    if got.shape != want.shape:
        return float("inf")
    if want.size == 0:
        return 0.0
    return float(np.abs(got - want).max() / max(1e-6, float(np.abs(want).max())))


def numpy_tensor(path):
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


if __name__ == "__main__":
    sys.exit(main())
