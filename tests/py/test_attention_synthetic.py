"""Attention spellings the bundled exports do not cover, built with the onnx helper
(random weights, symbolic batch/seq): torch's dynamo SDPA decomposition (sqrt-scale on Q
and on Kᵀ, a boolean [B,1,S,S] mask through Where(m, 0, -inf), Shape(start,end)
reshape targets), a KV cache (Concat of past keys/values in [B,H,S,D], present outputs
kept), cross-attention from an encoder (two layers: the four K/V projections of the
encoder output are packed together), multi-query attention by MatMul broadcast of
one kv head, no scale at all, opsets 14 and 18. For each: fuseopt must fuse every
attention (no Softmax left), the result must pass onnx.checker and reproduce the
original model's outputs in ONNX Runtime (1e-4), and `fuserun --backend cpu`
must agree through fuseopt's own kernels."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

H, DH = 4, 8
D = H * DH


class G:
    """A tiny graph builder over onnx.helper."""

    def __init__(self, opset):
        import numpy as np
        self.np = np
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.opset = opset
        self.n = 0
        self.rng = np.random.default_rng(7)

    def name(self, p):
        self.n += 1
        return f"{p}_{self.n}"

    def const(self, arr, p="c"):
        from onnx import numpy_helper
        nm = self.name(p)
        self.inits.append(numpy_helper.from_array(self.np.asarray(arr), nm))
        return nm

    def weight(self, *shape):
        return self.const((self.rng.standard_normal(shape) * 0.3).astype("float32"), "w")

    def op(self, op, ins, n_out=1, **attrs):
        from onnx import helper
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=self.name(op), **attrs))
        return outs if n_out > 1 else outs[0]

    def input(self, nm, elem, dims):
        from onnx import helper
        self.inputs.append(helper.make_tensor_value_info(nm, elem, dims))
        return nm

    def output(self, v):
        from onnx import helper
        self.outputs.append(helper.make_tensor_value_info(v, 1, None))

    def model(self):
        from onnx import helper
        g = helper.make_graph(self.nodes, "synthetic", self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 8
        return m

    # --- pieces --------------------------------------------------------------
    def ints(self, v):
        return self.const(self.np.array(v, dtype="int64"), "shape")

    def linear(self, x, n_in, n_out, bias=True):
        y = self.op("MatMul", [x, self.weight(n_in, n_out)])
        return self.op("Add", [y, self.const((self.rng.standard_normal(n_out) * 0.1).astype("float32"), "b")]) if bias else y

    def heads(self, x, h, dyn=False):
        """[B, S, h*DH] -> [B, h, S, DH]"""
        if dyn and self.opset >= 15:  # dynamo style: Concat(Shape(x, 0:1), Shape(x, 1:2), h, DH)
            b = self.op("Shape", [x], start=0, end=1)
            s = self.op("Shape", [x], start=1, end=2)
            target = self.op("Concat", [b, s, self.ints([h]), self.ints([DH])], axis=0)
        else:
            target = self.ints([0, 0, h, DH])
        return self.op("Transpose", [self.op("Reshape", [x, target])], perm=[0, 2, 1, 3])

    def merge(self, o, dyn=False):
        o = self.op("Transpose", [o], perm=[0, 2, 1, 3])
        if dyn and self.opset >= 15:
            b = self.op("Shape", [o], start=0, end=1)
            s = self.op("Shape", [o], start=1, end=2)
            return self.op("Reshape", [o, self.op("Concat", [b, s, self.ints([-1])], axis=0)])
        return self.op("Reshape", [o, self.ints([0, 0, -1])])

    def softmax_v(self, scores, v):
        return self.op("MatMul", [self.op("Softmax", [scores], axis=-1), v])


def sdpa_dynamo(opset):
    import onnx
    g = G(opset)
    x = g.input("x", onnx.TensorProto.FLOAT, ["batch", "seq", D])
    m = g.input("mask", onnx.TensorProto.BOOL, ["batch", 1, "seq", "seq"])
    q = g.heads(g.linear(x, D, D), H, dyn=True)
    k = g.heads(g.linear(x, D, D), H, dyn=True)
    v = g.heads(g.linear(x, D, D), H, dyn=True)
    sq = g.const(g.np.array(DH ** -0.25, dtype="float32"))
    kt = g.op("Mul", [g.op("Transpose", [k], perm=[0, 1, 3, 2]), sq])
    s = g.op("MatMul", [g.op("Mul", [q, sq]), kt])
    bias = g.op("Where", [m, g.const(g.np.array(0.0, dtype="float32")), g.const(g.np.array(-g.np.inf, dtype="float32"))])
    y = g.merge(g.softmax_v(g.op("Add", [s, bias]), v), dyn=True)
    g.output(g.linear(y, D, D))
    mask = g.np.tril(g.np.ones((5, 5), dtype=bool))[None, None].repeat(2, 0)
    return g.model(), {"x": g.rng.standard_normal((2, 5, D)).astype("float32"), "mask": mask}


def kv_cache(opset):
    import onnx
    g = G(opset)
    x = g.input("x", onnx.TensorProto.FLOAT, ["batch", "seq", D])
    pk = g.input("past_k", onnx.TensorProto.FLOAT, ["batch", H, "past", DH])
    pv = g.input("past_v", onnx.TensorProto.FLOAT, ["batch", H, "past", DH])
    q = g.heads(g.linear(x, D, D), H)
    k = g.op("Concat", [pk, g.heads(g.linear(x, D, D), H)], axis=2)
    v = g.op("Concat", [pv, g.heads(g.linear(x, D, D), H)], axis=2)
    s = g.op("Div", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                     g.const(g.np.array(DH ** 0.5, dtype="float32"))])
    g.output(g.merge(g.softmax_v(s, v)))
    g.output(k)
    g.output(v)
    r = g.rng
    return g.model(), {"x": r.standard_normal((2, 3, D)).astype("float32"),
                       "past_k": r.standard_normal((2, H, 4, DH)).astype("float32"),
                       "past_v": r.standard_normal((2, H, 4, DH)).astype("float32")}


def cross_attention(opset):
    import onnx
    g = G(opset)
    x = g.input("x", onnx.TensorProto.FLOAT, ["batch", "seq", D])
    enc = g.input("enc", onnx.TensorProto.FLOAT, ["batch", "enc_seq", D])
    h = x
    for _ in range(2):  # two decoder layers reading the same encoder output
        q = g.heads(g.linear(h, D, D), H)
        k = g.heads(g.linear(enc, D, D, bias=False), H)
        v = g.heads(g.linear(enc, D, D), H)
        s = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                         g.const(g.np.array(DH ** -0.5, dtype="float32"))])
        h = g.op("Add", [h, g.linear(g.merge(g.softmax_v(s, v)), D, D)])
    g.output(h)
    r = g.rng
    return g.model(), {"x": r.standard_normal((2, 3, D)).astype("float32"),
                       "enc": r.standard_normal((2, 7, D)).astype("float32")}


def multi_query(opset):
    import onnx
    g = G(opset)
    x = g.input("x", onnx.TensorProto.FLOAT, ["batch", "seq", D])
    q = g.heads(g.linear(x, D, D), H)
    k = g.heads(g.linear(x, D, DH), 1)  # one kv head, broadcast by MatMul
    v = g.heads(g.linear(x, D, DH), 1)
    s = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])  # no scale at all
    g.output(g.merge(g.softmax_v(s, v)))
    return g.model(), {"x": g.rng.standard_normal((2, 6, D)).astype("float32")}


def gpt2_legacy(opset):
    """transformers 4 GPT-2: Where(causal slice of a constant tril, s, finfo.min), then + (1 - m) * min."""
    import onnx
    g = G(opset)
    x = g.input("x", onnx.TensorProto.FLOAT, ["batch", "seq", D])
    m = g.input("attention_mask", onnx.TensorProto.INT64, ["batch", "seq"])
    qkv = g.linear(x, D, 3 * D)
    q, k, v = g.op("Split", [qkv, g.ints([D, D, D])], n_out=3, axis=2)
    q, k, v = g.heads(q, H), g.heads(k, H), g.heads(v, H)
    s = g.op("Div", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                     g.const(g.np.array(DH ** 0.5, dtype="float32"))])
    tril = g.const(g.np.tril(g.np.ones((16, 16), dtype=bool))[None, None], "bias_buffer")
    seq = g.op("Gather", [g.op("Shape", [x]), g.const(g.np.array([1], dtype="int64"))], axis=0)
    causal = g.op("Slice", [g.op("Slice", [tril, g.ints([0]), seq, g.ints([2])]), g.ints([0]), seq, g.ints([3])])
    minv = g.const(g.np.array(g.np.finfo("float32").min, dtype="float32"))
    s = g.op("Where", [causal, s, minv])
    m4 = g.op("Cast", [g.op("Unsqueeze", [m, g.ints([1, 2])])], to=1)
    s = g.op("Add", [s, g.op("Mul", [g.op("Sub", [g.const(g.np.array(1.0, dtype="float32")), m4]), minv])])
    g.output(g.linear(g.merge(g.softmax_v(s, v)), D, D))
    mask = g.np.ones((2, 6), dtype="int64")
    mask[1, -2:] = 0
    return g.model(), {"x": g.rng.standard_normal((2, 6, D)).astype("float32"), "attention_mask": mask}


CASES = [("sdpa_dynamo", sdpa_dynamo, 1), ("kv_cache", kv_cache, 1), ("cross_attention", cross_attention, 2),
         ("multi_query", multi_query, 1), ("gpt2_legacy", gpt2_legacy, 1)]


def main():
    args = lib.parse_args()
    onnx, _, np = lib.require("onnx", "onnxruntime", "numpy")
    from onnx import numpy_helper
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, n_attn in CASES:
            for opset in (14, 18):
                tag = f"{name}_op{opset}"
                if args.k and args.k not in tag:
                    continue
                model, feeds = make(opset)
                src, out = os.path.join(tmp, tag + ".onnx"), os.path.join(tmp, tag + ".opt.onnx")
                onnx.save(model, src)
                r = lib.run_fuseopt(args.bin, src, out, "-q")
                if r.returncode != 0:
                    failures.append(f"{tag}: fuseopt exit {r.returncode}: {r.stderr.strip()}")
                    continue
                opt = onnx.load(out)
                ops = [n.op_type for n in opt.graph.node]
                if ops.count("Attention") != n_attn or "Softmax" in ops:
                    failures.append(f"{tag}: {ops.count('Attention')} Attention (want {n_attn}), "
                                    f"{ops.count('Softmax')} Softmax left")
                try:
                    onnx.checker.check_model(out, full_check=True)
                except Exception as e:  # noqa: BLE001
                    failures.append(f"{tag}: onnx.checker: {str(e).splitlines()[0]}")
                names = [i.name for i in model.graph.input]
                want = lib.run_ort(src, [feeds[n] for n in names])
                got = lib.run_ort(out, [feeds[n] for n in names])
                for i, (gv, wv) in enumerate(zip(got, want)):
                    why = lib.compare(gv, wv, 1e-4, 1e-4)
                    if why:
                        failures.append(f"{tag}: onnxruntime output {i}: {why}")
                # fuseopt's own CPU kernels on the optimized model, against ORT on the original.
                data = os.path.join(tmp, tag + "_data")
                os.makedirs(data)
                for i, n in enumerate(names):
                    with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
                        f.write(numpy_helper.from_array(np.asarray(feeds[n]), n).SerializeToString())
                for i, w in enumerate(want):
                    with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
                        f.write(numpy_helper.from_array(w).SerializeToString())
                fr = subprocess.run([os.path.join(args.bin, "fuserun"), out, "--backend", "cpu", "--check", data],
                                    capture_output=True, text=True, timeout=300)
                if fr.returncode != 0:
                    tail = (fr.stdout + fr.stderr).strip().splitlines()[-2:]
                    failures.append(f"{tag}: fuserun --backend cpu --check exit {fr.returncode}: {' | '.join(tail)}")
                print(("ok " if not any(f.startswith(tag) for f in failures) else "FAIL ") + tag +
                      f": {ops.count('Attention')} Attention, {len(ops)} nodes")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
