"""Attention score chains beyond scale·Q·Kᵀ + mask, built with the onnx helper (random
weights, symbolic batch/seq, opsets 14 and 18), against ONNX Runtime on the original:

  positive (one fuseopt.Attention, no Softmax left; ORT on the output and
  `fuserun --backend cpu --check` reproduce the original at 1e-4; `--emit standard` too
  where the op has a standard form):
    softcap          Gemma-2: cap·tanh(s·scale / cap) + (1 - m)·min      -> softcap = cap
    gptj_causal      Where(causal tril slice, s, min) / sqrt(d) + (1 - m)·min -> causal + mask
    mask_then_scale  (s + (1 - m)·min) · c                               -> mask, fill min·c
    bias_then_scale  (s + position bias) / sqrt(d) + (1 - m)·min         -> attn_bias = bias/sqrt(d) + ...
    mha_seq_first    torch nn.MultiheadAttention bmm path on [S, B, E]   -> packed, mask = Not(kpm)
  negative (no Attention; the report names the rule and the node):
    mask_in_tanh     tanh((s + mask) / cap) · cap                        -> rule 7 inside the soft-capping Tanh
    negative_factor  (s + (1 - m)·min) · (-c)                            -> rule 7 non-positive factor
    conv_1x1         1x1-Conv q/k/v, bmm on [B, C, H·W] (diffusion AttnBlock) -> rule 4 channels-first
Exit 77 (skipped) without onnx / onnxruntime / numpy."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402
from test_attention_synthetic import G, H, DH, D  # noqa: E402

F32_MIN = -3.4028234663852886e38


def qkv(g, x):
    return g.heads(g.linear(x, D, D), H), g.heads(g.linear(x, D, D), H), g.heads(g.linear(x, D, D), H)


def scores(g, q, k):
    return g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])


def f32(g, v):
    return g.const(g.np.array(v, dtype="float32"))


def padding(g, m):
    """HF additive (1 - m)·min over a bool cast (provably 0 / min)."""
    mb = g.op("Cast", [g.op("Unsqueeze", [m, g.ints([1, 2])])], to=9)
    return g.op("Mul", [g.op("Sub", [f32(g, 1.0), g.op("Cast", [mb], to=1)]), f32(g, F32_MIN)])


def block(opset, score_fn):
    import onnx
    g = G(opset)
    x = g.input("x", onnx.TensorProto.FLOAT, ["batch", "seq", D])
    m = g.input("attention_mask", onnx.TensorProto.INT64, ["batch", "seq"])
    q, k, v = qkv(g, x)
    s = score_fn(g, scores(g, q, k), m, x)
    g.output(g.linear(g.merge(g.softmax_v(s, v)), D, D))
    mask = g.np.ones((2, 6), dtype="int64")
    mask[1, -2:] = 0
    return g.model(), {"x": (g.rng.standard_normal((2, 6, D)) * 2).astype("float32"), "attention_mask": mask}


def softcap(g, s, m, x):
    s = g.op("Div", [g.op("Mul", [s, f32(g, DH ** -0.5)]), f32(g, 1.5)])
    return g.op("Add", [g.op("Mul", [g.op("Tanh", [s]), f32(g, 1.5)]), padding(g, m)])


def causal_slice(g, x):
    tril = g.const(g.np.tril(g.np.ones((16, 16), dtype=bool))[None, None], "bias_buffer")
    seq = g.op("Gather", [g.op("Shape", [x]), g.const(g.np.array([1], dtype="int64"))], axis=0)
    return g.op("Slice", [g.op("Slice", [tril, g.ints([0]), seq, g.ints([2])]), g.ints([0]), seq, g.ints([3])])


def gptj_causal(g, s, m, x):
    s = g.op("Where", [causal_slice(g, x), s, f32(g, F32_MIN)])
    return g.op("Add", [g.op("Div", [s, f32(g, DH ** 0.5)]), padding(g, m)])


def mask_then_scale(g, s, m, x):
    return g.op("Mul", [g.op("Add", [s, padding(g, m)]), f32(g, DH ** -0.5)])


def bias_then_scale(g, s, m, x):
    bias = g.const((g.rng.standard_normal((1, H, 6, 6)) * 2).astype("float32"), "pos_bias")
    return g.op("Add", [g.op("Div", [g.op("Add", [s, bias]), f32(g, DH ** 0.5)]), padding(g, m)])


def mask_in_tanh(g, s, m, x):
    s = g.op("Div", [g.op("Add", [g.op("Mul", [s, f32(g, DH ** -0.5)]), padding(g, m)]), f32(g, 1.5)])
    return g.op("Mul", [g.op("Tanh", [s]), f32(g, 1.5)])


def negative_factor(g, s, m, x):
    return g.op("Mul", [g.op("Add", [s, padding(g, m)]), f32(g, -(DH ** -0.5))])


def mha_seq_first(opset):
    """torch's multi_head_attention_forward (need_weights=True bmm path) on x [S, B, E]."""
    import onnx
    g = G(opset)
    x = g.input("x", onnx.TensorProto.FLOAT, ["seq", "batch", D])
    kpm = g.input("key_padding_mask", onnx.TensorProto.BOOL, ["batch", "seq"])
    lin = g.linear(x, D, 3 * D)
    sq = g.op("Squeeze", [g.op("Transpose", [g.op("Unsqueeze", [g.op("Reshape", [lin, g.ints([0, 0, 3, D])]), g.ints([0])])],
                               perm=[3, 1, 2, 0, 4]), g.ints([-2])])

    def pick(i):
        return g.op("Reshape", [g.op("Gather", [sq, g.const(g.np.array(i, dtype="int64"))], axis=0), g.ints([0, -1, DH])])

    q, k, v = pick(0), pick(1), pick(2)
    qs = g.op("Mul", [g.op("Transpose", [q], perm=[1, 0, 2]), f32(g, DH ** -0.5)])
    s = g.op("MatMul", [qs, g.op("Transpose", [k], perm=[1, 2, 0])])
    fill = g.op("Where", [kpm, f32(g, -g.np.inf), g.op("Expand", [f32(g, 0.0), g.op("Shape", [kpm])])])
    bias = g.op("Expand", [g.op("Reshape", [fill, g.ints([0, 1, 1, -1])]), g.ints([1, H, 1, 1])])
    flat = g.op("Concat", [g.ints([-1, 1]), g.op("Shape", [kpm], start=1)], axis=0) if opset >= 15 else None
    if flat is None:  # opset 14: Shape has no start attribute
        flat = g.op("Concat", [g.ints([-1, 1]), g.op("Slice", [g.op("Shape", [kpm]), g.ints([1]), g.ints([2])])], axis=0)
    s = g.op("Add", [s, g.op("Reshape", [bias, flat])])
    o = g.op("Transpose", [g.softmax_v(s, g.op("Transpose", [v], perm=[1, 0, 2]))], perm=[1, 0, 2])
    rows = g.op("Reshape", [o, g.ints([-1, D])])
    proj = g.op("MatMul", [rows, g.weight(D, D)])
    sbe = g.op("Concat", [g.op("Slice", [g.op("Shape", [x]), g.ints([0]), g.ints([2])]), g.ints([D])], axis=0)
    g.output(g.op("Reshape", [proj, sbe]))
    m = g.np.zeros((2, 6), dtype=bool)
    m[1, -2:] = True
    return g.model(), {"x": g.rng.standard_normal((6, 2, D)).astype("float32"), "key_padding_mask": m}


def conv_attn(opset):
    """A diffusion-VAE style AttnBlock: 1x1-Conv q/k/v on [B, C, H, W], bmm on [B, C, H*W]."""
    import onnx
    g = G(opset)
    C = 8
    x = g.input("x", onnx.TensorProto.FLOAT, ["batch", C, "h", "w"])

    def conv(t):
        return g.op("Conv", [t, g.const((g.rng.standard_normal((C, C, 1, 1)) * 0.3).astype("float32"), "w"),
                             g.const(g.np.zeros(C, dtype="float32"), "b")], kernel_shape=[1, 1])

    q, k, v = conv(x), conv(x), conv(x)
    shp = g.op("Shape", [q])
    flat = g.op("Concat", [g.op("Slice", [shp, g.ints([0]), g.ints([2])]), g.ints([-1])], axis=0)
    s = g.op("MatMul", [g.op("Transpose", [g.op("Reshape", [q, flat])], perm=[0, 2, 1]), g.op("Reshape", [k, flat])])
    p = g.op("Softmax", [g.op("Mul", [s, f32(g, C ** -0.5)])], axis=-1)
    o = g.op("MatMul", [g.op("Reshape", [v, flat]), g.op("Transpose", [p], perm=[0, 2, 1])])
    g.output(g.op("Add", [x, conv(g.op("Reshape", [o, shp]))]))
    return g.model(), {"x": g.rng.standard_normal((2, C, 3, 4)).astype("float32")}


# name, builder, expected Attention count, expected attributes (or the rejection text)
POSITIVE = [
    ("softcap", lambda o: block(o, softcap), {"softcap": 1.5, "mask": True}),
    ("gptj_causal", lambda o: block(o, gptj_causal), {"causal": 1, "mask": True}),
    ("mask_then_scale", lambda o: block(o, mask_then_scale), {"mask": True, "mask_filter_value": F32_MIN * DH ** -0.5}),
    ("bias_then_scale", lambda o: block(o, bias_then_scale), {"attn_bias": True}),
    ("mha_seq_first", mha_seq_first, {"mask": True, "attn_bias": False}),
]
NEGATIVE = [
    ("mask_in_tanh", lambda o: block(o, mask_in_tanh), "inside the soft-capping Tanh"),
    ("negative_factor", lambda o: block(o, negative_factor), "multiplied by the non-positive factor"),
    ("conv_1x1", conv_attn, "a 1x1-convolution projection"),
]


def main():
    args = lib.parse_args()
    onnx, _, np = lib.require("onnx", "onnxruntime", "numpy")
    from onnx import numpy_helper
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for opset in (14, 18):
            for name, make, want in POSITIVE + NEGATIVE:
                tag = f"{name}_op{opset}"
                if args.k and args.k not in tag:
                    continue
                model, feeds = make(opset)
                src = os.path.join(tmp, tag + ".onnx")
                onnx.save(model, src)
                names = [i.name for i in model.graph.input]
                ref = lib.run_ort(src, [feeds[n] for n in names])
                out, report = os.path.join(tmp, tag + ".opt.onnx"), os.path.join(tmp, tag + ".json")
                r = lib.run_fuseopt(args.bin, src, out, "-q", "--report", report)
                if r.returncode != 0:
                    failures.append(f"{tag}: fuseopt exit {r.returncode}: {r.stderr.strip()}")
                    continue
                opt = onnx.load(out)
                attn = [n for n in opt.graph.node if n.op_type == "Attention"]
                ops = [n.op_type for n in opt.graph.node]
                if isinstance(want, str):  # negative: unfused, with the reason
                    with open(report) as f:
                        reasons = [x for p in json.load(f)["patterns"] if p["name"] == "Attention" for x in p.get("reasons", [])]
                    if attn or "Softmax" not in ops:
                        failures.append(f"{tag}: fused although it must be refused")
                    if not any(want in x and ("rule 7" in x or "rule 4" in x) for x in reasons):
                        failures.append(f"{tag}: no rejection reason with '{want}': {reasons}")
                else:
                    if len(attn) != 1 or "Softmax" in ops:
                        failures.append(f"{tag}: {len(attn)} Attention, {ops.count('Softmax')} Softmax left")
                    else:
                        a = {x.name: onnx.helper.get_attribute_value(x) for x in attn[0].attribute}
                        has = {"mask": len(attn[0].input) > 3 and bool(attn[0].input[3]),
                               "attn_bias": len(attn[0].input) > 4 and bool(attn[0].input[4])}
                        for key, val in want.items():
                            got = has[key] if key in has else a.get(key)
                            ok = got == val if not isinstance(val, float) else got is not None and abs(got - val) <= 1e-6 * abs(val)
                            if not ok:
                                failures.append(f"{tag}: {key} = {got}, want {val}")
                # The output (fused or not) reproduces the original in ORT and in fuserun.
                for mode in ("fuseopt", "standard"):
                    path = out if mode == "fuseopt" else os.path.join(tmp, tag + ".std.onnx")
                    if mode == "standard":
                        rs = lib.run_fuseopt(args.bin, src, path, "-q", "--emit", "standard")
                        if rs.returncode != 0:
                            continue  # no exact standard form (reported by fuseopt; not this test's subject)
                    got = lib.run_ort(path, [feeds[n] for n in names])
                    for i, (gv, wv) in enumerate(zip(got, ref)):
                        why = lib.compare(gv, wv, 1e-4, 1e-4)
                        if why:
                            failures.append(f"{tag} ({mode}): onnxruntime output {i}: {why}")
                data = os.path.join(tmp, tag + "_data")
                os.makedirs(data)
                for i, n in enumerate(names):
                    with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
                        f.write(numpy_helper.from_array(np.asarray(feeds[n]), n).SerializeToString())
                for i, w in enumerate(ref):
                    with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
                        f.write(numpy_helper.from_array(w).SerializeToString())
                fr = subprocess.run([os.path.join(args.bin, "fuserun"), out, "--backend", "cpu", "--check", data],
                                    capture_output=True, text=True, timeout=300)
                if fr.returncode != 0:
                    tail = (fr.stdout + fr.stderr).strip().splitlines()[-2:]
                    failures.append(f"{tag}: fuserun --backend cpu --check exit {fr.returncode}: {' | '.join(tail)}")
                print(("ok " if not any(f.startswith(tag) for f in failures) else "FAIL ") + tag +
                      f": {len(attn)} Attention, {len(ops)} nodes")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
