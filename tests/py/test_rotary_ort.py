"""fuseopt.RotaryEmbedding end to end on small rotary subgraphs written here the way the
exporters write them, with dynamic batch/seq: HF rotate_half after the head transpose (full,
and partial rotary with the pass-through Concat), GPT-J's interleaved rotate_every_two on
[B, S, H, D] (partial), RoFormer's interleaved form on [B, H, S, D]; cos/sin as
Cos/Sin(Concat(f, f)) (half-split) or repeat_interleave of a table (interleaved), shared by Q
and K; opsets 14, 17, 18; float32 and float16. For each: fuseopt (default passes) must leave
two RotaryEmbedding ops and no Neg or data Slice, at most one Cos and one Sin; the result must
pass onnx.checker (full_check); ONNX Runtime running the function body (in the model's opset)
must reproduce ONNX Runtime on the original; and `fuserun --backend cpu --check` (fuseopt's
kernel) the same reference."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

B, H, S = 2, 3, 5


def build(kind, opset, fp16):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    d, r = {"half": (8, 8), "partial": (12, 8), "gptj": (12, 8), "roformer": (8, 8)}[kind]
    h = r // 2
    et = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    nodes, inits = [], []
    k = [0]

    def name(p):
        k[0] += 1
        return f"{p}{k[0]}"

    def ints(v):
        n = name("c")
        inits.append(numpy_helper.from_array(np.asarray(v, dtype=np.int64), n))
        return n

    def op(t, ins, **attrs):
        o = name(t.lower())
        nodes.append(helper.make_node(t, ins, [o], **attrs))
        return o

    def unsq(x, axes):
        return op("Unsqueeze", [x, ints(axes)]) if opset >= 13 else op("Unsqueeze", [x], axes=axes)

    def sl(x, s, e, step=1):
        ins = [x, ints([s]), ints([e]), ints([-1])]
        if step != 1:
            ins.append(ints([step]))
        return op("Slice", ins)

    def to_et(x):
        return op("Cast", [x], to=et) if fp16 else x

    end = 2**63 - 1
    bshd = kind == "gptj"
    # cos / sin operands of the Muls.
    if kind in ("half", "partial"):
        emb = op("Concat", ["freqs", "freqs"], axis=-1)
        cos = unsq(to_et(op("Cos", [emb])), [1])
        sin = unsq(to_et(op("Sin", [emb])), [1])
    else:
        def rep(t):
            t = to_et(t)
            if bshd:  # Unsqueeze [2, 4] -> Expand .., 2 -> Reshape [1, -1, 1, R]
                e = op("Expand", [unsq(t, [2, 4]), ints([1, 1, 1, 1, 2])])
                return op("Reshape", [e, ints([1, -1, 1, r])])
            u = unsq(unsq(t, [1]), [-1])
            return op("Reshape", [op("Concat", [u, u], axis=-1), ints([1, 1, -1, r])])
        cos, sin = rep(op("Cos", ["freqs"])), rep(op("Sin", ["freqs"]))

    def rope(x3):
        x4 = op("Reshape", [x3, ints([0, 0, H, d])])
        x = x4 if bshd else op("Transpose", [x4], perm=[0, 2, 1, 3])
        xr = sl(x, 0, r) if r < d else x
        if kind in ("half", "partial"):
            rot = op("Concat", [op("Neg", [sl(xr, h, end)]), sl(xr, 0, h)], axis=-1)
        else:
            st = op("Concat", [unsq(op("Neg", [sl(xr, 1, end, 2)]), [-1]), unsq(sl(xr, 0, end, 2), [-1])], axis=-1)
            shape = op("Concat", [op("Slice", [op("Shape", [x]), ints([0]), ints([3])]), ints([r])], axis=0)
            rot = op("Reshape", [st, shape])
        y = op("Add", [op("Mul", [xr, cos]), op("Mul", [rot, sin])])
        if r < d:
            y = op("Concat", [y, sl(x, r, end)], axis=-1)
        return y

    outs = [rope("q"), rope("k")]
    g = helper.make_graph(
        nodes, f"rotary_{kind}",
        [helper.make_tensor_value_info("q", et, ["batch", "seq", H * d]),
         helper.make_tensor_value_info("k", et, ["batch", "seq", H * d]),
         helper.make_tensor_value_info("freqs", TensorProto.FLOAT, [1, "seq", h])],
        [helper.make_tensor_value_info(o, et, None) for o in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    rng = np.random.default_rng(3)
    nt = np.float16 if fp16 else np.float32
    feeds = [rng.standard_normal((B, S, H * d)).astype(nt), rng.standard_normal((B, S, H * d)).astype(nt),
             (rng.random((1, S, h)) * 5).astype(np.float32)]
    return m, feeds


def main():
    args = lib.parse_args()
    onnx, ort, np = lib.require("onnx", "onnxruntime", "numpy")
    from onnx import numpy_helper
    failures = []
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("half", "partial", "gptj", "roformer"):
            for opset in (14, 17, 18):
                for fp16 in (False, True):
                    name = f"{kind}_op{opset}_{'fp16' if fp16 else 'fp32'}"
                    if args.k not in name:
                        continue
                    n += 1
                    m, feeds = build(kind, opset, fp16)
                    src = os.path.join(tmp, name + ".onnx")
                    dst = os.path.join(tmp, name + ".opt.onnx")
                    onnx.save(m, src)
                    r = lib.run_fuseopt(args.bin, src, dst, "-q")
                    if r.returncode != 0:
                        failures.append(f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()}")
                        continue
                    opt = onnx.load(dst)
                    ops = [x.op_type for x in opt.graph.node]
                    prod = {o: x for x in opt.graph.node for o in x.output}
                    data_slices = [x for x in opt.graph.node if x.op_type == "Slice"
                                   and not (x.input[0] in prod and prod[x.input[0]].op_type == "Shape")]
                    if (ops.count("RotaryEmbedding") != 2 or "Neg" in ops or data_slices
                            or ops.count("Cos") > 1 or ops.count("Sin") > 1):
                        failures.append(f"{name}: expected two RotaryEmbedding, no Neg/Slice, got {ops}")
                    try:
                        onnx.checker.check_model(dst, full_check=True)
                    except Exception as e:  # noqa: BLE001
                        failures.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
                    try:
                        want = lib.run_ort(src, feeds)
                        got = lib.run_ort(dst, feeds)
                    except Exception as e:  # noqa: BLE001
                        failures.append(f"{name}: onnxruntime failed: {str(e).splitlines()[0]}")
                        continue
                    for i, (g, w) in enumerate(zip(got, want)):
                        why = lib.compare(g, w, 1e-4, 1e-4)
                        if why:
                            failures.append(f"{name}: ONNX Runtime on the function body, output {i}: {why}")
                    data = os.path.join(tmp, name + "_data")
                    os.makedirs(data)
                    for i, arr in enumerate(feeds):
                        with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
                            f.write(numpy_helper.from_array(arr).SerializeToString())
                    for i, arr in enumerate(want):
                        with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
                            f.write(numpy_helper.from_array(arr).SerializeToString())
                    fr = subprocess.run([os.path.join(args.bin, "fuserun"), dst, "--backend", "cpu", "--check", data],
                                        capture_output=True, text=True, timeout=600)
                    if fr.returncode != 0:
                        tail = (fr.stdout + fr.stderr).strip().splitlines()[-3:]
                        failures.append(f"{name}: fuserun --backend cpu --check exit {fr.returncode}: {' | '.join(tail)}")
                    print(("FAIL " if any(f.startswith(name + ":") for f in failures) else "ok   ") + name)
    for f in failures:
        print("FAIL", f)
    print(f"{n} models, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
