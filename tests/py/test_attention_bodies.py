"""The ONNX function bodies of fuseopt.Attention and fuseopt.LayerNormLinear against
fuseopt's CPU kernels, variant by variant (the overloads): a model holding one fused
node is passed through `fuseopt --passes none` (which writes the function bodies),
ONNX Runtime runs the bodies, and `fuserun --backend cpu --check` must reproduce
ORT's outputs with the kernels (1e-4). Attention: packed / separate QKV, GQA, float
and bool attn_bias, key-padding mask (int64 and bool), causal with S_kv != S, all
together, logit soft-capping (softcap), masked_rows_zero (rows with no visible key give 0),
a batch of 0 (the bodies' Reshapes write no -1: mutate_models.py seed 5 m287).
LayerNormLinear: LN / RMS, beta, bias, skip with the Sum output, transB,
activations, opsets 14 (primitives) and 18 (LayerNormalization)."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def attention_model(np, packed, H, Hkv, Dh, S, Skv, mask, bias, causal, softcap=0.0, rows_zero=False, opset=17, B=2):
    import onnx
    from onnx import helper, TensorProto
    rng = np.random.default_rng(3)
    feeds, ins = {}, []

    def add(name, arr, elem):
        feeds[name] = arr
        ins.append(helper.make_tensor_value_info(name, elem, list(arr.shape)))
        return name

    node_in = []
    if packed:
        node_in = [add("qkv", rng.standard_normal((B, S, (H + 2 * Hkv) * Dh)).astype("float32"), TensorProto.FLOAT), "", ""]
    else:
        node_in = [add("q", rng.standard_normal((B, S, H * Dh)).astype("float32"), TensorProto.FLOAT),
                   add("k", rng.standard_normal((B, Skv, Hkv * Dh)).astype("float32"), TensorProto.FLOAT),
                   add("v", rng.standard_normal((B, Skv, Hkv * Dh)).astype("float32"), TensorProto.FLOAT)]
    if mask:
        m = np.ones((B, Skv), dtype="int64")
        m[1:2, -2:] = 0
        if rows_zero:
            m[1, :] = 0  # a fully masked batch: NaN rows after the body's Softmax, 0 after its guard
        if mask == "bool":
            node_in.append(add("mask", m.astype(bool), TensorProto.BOOL))
        else:
            node_in.append(add("mask", m, TensorProto.INT64))
    elif bias:
        node_in.append("")
    if bias == "float":
        node_in.append(add("bias", rng.standard_normal((1, H, S, Skv)).astype("float32"), TensorProto.FLOAT))
    elif bias == "bool":
        b = rng.random((B, 1, S, Skv)) > 0.3
        b[..., 0] = True
        node_in.append(add("bias", b, TensorProto.BOOL))
    node = helper.make_node("Attention", node_in, ["y"], domain="fuseopt", num_heads=H, kv_num_heads=Hkv,
                            scale=0.3, causal=int(causal),
                            mask_filter_value=float("-inf") if rows_zero else -3.4028234663852886e38,
                            **({"softcap": softcap} if softcap else {}),
                            **({"masked_rows_zero": 1} if rows_zero else {}))
    g = helper.make_graph([node], "att", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, S, H * Dh])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("fuseopt", 1)])
    m.ir_version = 10
    return m, feeds


def lnl_model(np, rms, beta, bias, skip, transB, act, opset):
    from onnx import helper, TensorProto, numpy_helper
    rng = np.random.default_rng(5)
    K, N = 12, 7
    feeds = {"X": rng.standard_normal((2, 3, K)).astype("float32")}
    ins = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3, K])]
    inits = [numpy_helper.from_array(rng.standard_normal(K).astype("float32"), "gamma")]
    node_in = ["X", "gamma", ""]
    if beta:
        inits.append(numpy_helper.from_array(rng.standard_normal(K).astype("float32"), "beta"))
        node_in[2] = "beta"
    inits.append(numpy_helper.from_array(rng.standard_normal((N, K) if transB else (K, N)).astype("float32"), "W"))
    node_in.append("W")
    node_in.append("")
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(N).astype("float32"), "bias"))
        node_in[4] = "bias"
    outs = ["y"]
    if skip:
        feeds["skip"] = rng.standard_normal((1, 3, K)).astype("float32")  # a broadcast position table
        ins.append(helper.make_tensor_value_info("skip", TensorProto.FLOAT, [1, 3, K]))
        node_in.append("skip")
        outs.append("sum")
    while node_in and node_in[-1] == "":
        node_in.pop()
    node = helper.make_node("LayerNormLinear", node_in, outs, domain="fuseopt", epsilon=1e-5, rms=int(rms),
                            transB=int(transB), activation=act)
    out_shapes = {"y": [2, 3, N], "sum": [2, 3, K]}
    g = helper.make_graph([node], "lnl", ins,
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, out_shapes[o]) for o in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("fuseopt", 1)])
    m.ir_version = 10
    return m, feeds


def check(args, tmp, tag, model, feeds, failures):
    import onnx
    import numpy as np
    from onnx import numpy_helper
    src, out = os.path.join(tmp, tag + ".onnx"), os.path.join(tmp, tag + ".fused.onnx")
    onnx.save(model, src)
    r = lib.run_fuseopt(args.bin, src, out, "-q", "--passes", "none")
    if r.returncode != 0:
        failures.append(f"{tag}: fuseopt exit {r.returncode}: {r.stderr.strip()}")
        return
    try:
        onnx.checker.check_model(out, full_check=True)
    except Exception as e:  # noqa: BLE001
        failures.append(f"{tag}: onnx.checker: {str(e).splitlines()[0]}")
    names = [i.name for i in model.graph.input]
    try:
        got = lib.run_ort(out, [feeds[n] for n in names])
    except Exception as e:  # noqa: BLE001
        failures.append(f"{tag}: onnxruntime: {str(e).splitlines()[0]}")
        return
    data = os.path.join(tmp, tag + "_data")
    os.makedirs(data)
    for i, n in enumerate(names):
        with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(feeds[n]), n).SerializeToString())
    for i, w in enumerate(got):
        if np.isnan(w).any():
            failures.append(f"{tag}: NaN in ONNX Runtime's output")
        with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(w).SerializeToString())
    fr = subprocess.run([os.path.join(args.bin, "fuserun"), out, "--backend", "cpu", "--check", data],
                        capture_output=True, text=True, timeout=300)
    if fr.returncode != 0:
        tail = (fr.stdout + fr.stderr).strip().splitlines()[-2:]
        failures.append(f"{tag}: body vs kernel (fuserun --check) exit {fr.returncode}: {' | '.join(tail)}")
    else:
        print(f"ok {tag}")


def main():
    args = lib.parse_args()
    _, _, np = lib.require("onnx", "onnxruntime", "numpy")
    failures = []
    att = [
        # packed, H, Hkv, Dh, S, Skv, mask, bias, causal
        (True, 4, 4, 8, 5, 5, None, None, False),
        (False, 4, 4, 8, 5, 5, None, "float", False),
        (True, 4, 2, 8, 5, 5, "int64", None, False),
        (False, 6, 2, 4, 3, 7, "bool", "bool", False),
        (False, 4, 1, 8, 3, 6, None, None, True),
        (True, 4, 2, 8, 5, 5, "int64", "float", True),
        # softcap (Gemma-2): cap·tanh(s / cap) after the scale, before bias and masks
        (False, 4, 2, 8, 5, 5, "int64", "float", True, 1.5),
        (True, 4, 4, 8, 5, 5, None, "bool", False, 0.5),
        # masked_rows_zero (torch SDPA's Where(IsNaN(P), 0, P) folded in): -inf fill, rows
        # with no visible key (a fully masked batch; causal with S > S_kv) give 0
        (True, 4, 2, 8, 5, 5, "int64", None, False, 0.0, True),
        (False, 4, 1, 8, 6, 3, "bool", None, True, 0.0, True),
    ]
    # A batch of 0 (mutate_models.py seed 5 m287: the body's Reshape [0, 0, H, -1] was invalid
    # ONNX for it): packed, separate with GQA and a mask, causal.
    att_b0 = [
        (True, 4, 4, 8, 5, 5, None, None, False),
        (False, 4, 2, 8, 5, 5, "int64", None, False),
        (False, 4, 1, 8, 3, 6, None, None, True),
    ]
    lnl = [
        # rms, beta, bias, skip, transB, act
        (False, True, True, False, False, "none"),
        (False, True, True, True, False, "gelu"),
        (True, False, False, True, True, "relu"),
        (False, False, True, False, True, "gelu_tanh"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for i, c in enumerate(att):
            tag = (f"attention_{i}_{'packed' if c[0] else 'sep'}_h{c[1]}kv{c[2]}_{c[6]}_{c[7]}{'_causal' if c[8] else ''}"
                   f"{'_softcap' if len(c) > 9 and c[9] else ''}{'_rows0' if len(c) > 10 and c[10] else ''}")
            if args.k in tag:
                m, f = attention_model(np, *c)
                check(args, tmp, tag, m, f, failures)
        for i, c in enumerate(att_b0):
            tag = f"attention_batch0_{i}_{'packed' if c[0] else 'sep'}_h{c[1]}kv{c[2]}_{c[6]}{'_causal' if c[8] else ''}"
            if args.k in tag:
                m, f = attention_model(np, *c, B=0)
                check(args, tmp, tag, m, f, failures)
        for opset in (14, 18):
            for i, c in enumerate(lnl):
                tag = f"lnl_op{opset}_{i}_{'rms' if c[0] else 'ln'}_{c[5]}"
                if args.k in tag:
                    m, f = lnl_model(np, *c, opset)
                    check(args, tmp, tag, m, f, failures)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
