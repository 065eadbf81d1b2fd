#!/usr/bin/env python3
"""Writes a Llama/Mistral-shaped decoder with random weights and external data, as big as a
real 7B-class model, without needing that much memory:

    python3 models/make_big_model.py OUT_DIR [--preset 7b] [--dtype fp16] [--seed 0]
                                     [--layers N --hidden N --heads N --kv-heads N
                                      --intermediate N --vocab N]

OUT_DIR/model.onnx holds the graph, OUT_DIR/model.onnx.data every weight of 1 KiB or more.
The side file is written tensor by tensor in 32 MiB chunks, and the ModelProto only carries
external_data entries (location, offset, length), so the generator's own memory stays small
whatever the model's size. Needs numpy and onnx only.

Presets (weights in fp16; `--dtype fp32` doubles them):
  7b        Mistral-7B shapes: 32 layers, hidden 4096, 32 heads / 8 KV heads, FFN 14336,
            vocab 32000: 7.24 B parameters, 14.5 GB (the issue's ">= 14 GB 7B-class model")
  llama2-7b Llama-2-7B shapes: 32 layers, 4096, 32 / 32 heads, FFN 11008, vocab 32000: 13.5 GB
  1b        Llama-3.2-1B shapes: 16 layers, 2048, 32 / 8 heads, FFN 8192, vocab 128256: 2.5 GB
            (4.9 GB with --dtype fp32, the issue's export)
  1.5g      14 layers, 2048, 16 / 4 heads, FFN 5632, vocab 32000: 1.5 GB (to iterate with)
  tiny      2 layers, 256, 4 / 2 heads, FFN 512, vocab 1000: 4 MB (the generator's own test)

The graph is the ONNX form torch's dynamo exporter (opset 18) gives a Hugging Face Llama in
half precision (mirrors models/exported/llama_op18_dynamo, with the fp16 casts HF adds):
  - the transformers-5 bool mask: kv_idx <= q_idx And GatherND(Cast(attention_mask, BOOL)),
    Where(keep, 0, finfo(fp16).min);
  - rotary: Cast(positions) fp32, inv_freq MatMul, Concat(freqs, freqs), Cos/Sin, Cast to fp16;
    x*cos + Concat(-x2, x1)*sin per head;
  - RMSNorm: Cast to fp32, Pow/ReduceMean/Add/Sqrt/Reciprocal/Mul, Cast back, Mul(gamma);
  - attention: q/k/v MatMuls, head Reshape/Transpose, GQA Unsqueeze/Expand/Reshape repeat,
    MatMul(q, kT) * scale + mask, Cast fp32 / Softmax / Cast fp16, MatMul(P, v), o_proj;
  - SwiGLU MLP: MatMul(gate), Sigmoid, Mul, MatMul(up), Mul, MatMul(down); residual Adds;
  - final RMSNorm and the lm_head MatMul: logits [batch, seq, vocab].
Weights are MatMul's [in, out] (as the exporter writes them). Random values: |w| in
[2^-7, 2^-6) with random signs and mantissas (norm-preserving enough that 32 layers stay far
from fp16 overflow); RMSNorm gammas in [0.75, 1.25]. Same seed, same bytes.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

PRESETS = {
    "7b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, intermediate=14336, vocab=32000),
    "llama2-7b": dict(layers=32, hidden=4096, heads=32, kv_heads=32, intermediate=11008, vocab=32000),
    "1b": dict(layers=16, hidden=2048, heads=32, kv_heads=8, intermediate=8192, vocab=128256),
    "1.5g": dict(layers=14, hidden=2048, heads=16, kv_heads=4, intermediate=5632, vocab=32000),
    "tiny": dict(layers=2, hidden=256, heads=4, kv_heads=2, intermediate=512, vocab=1000),
}
CHUNK_ELEMS = 16 << 20  # 32 MiB of fp16 per write
EXTERNAL_MIN_BYTES = 1024


class SideFile:
    """Appends weights to OUT.data chunk by chunk; returns external TensorProtos."""

    def __init__(self, path, seed):
        self.path = path
        self.name = os.path.basename(path)
        self.f = open(path, "wb")
        self.offset = 0
        self.bits = np.random.SFC64(seed)

    def random_tensor(self, name, dims, dtype):
        """A weight of uniform random magnitude in [2^-7, 2^-6), random sign: from raw bits."""
        n = int(np.prod(dims))
        start = self.offset
        done = 0
        while done < n:
            k = min(CHUNK_ELEMS, n - done)
            if dtype == TP.FLOAT16:
                raw = self.bits.random_raw((k + 3) // 4).view(np.uint16)[:k]
                raw &= np.uint16(0x83FF)  # sign + mantissa
                raw |= np.uint16(8 << 10)  # exponent 2^-7
            else:
                raw = self.bits.random_raw((k + 1) // 2).view(np.uint32)[:k]
                raw &= np.uint32(0x807FFFFF)
                raw |= np.uint32(120 << 23)
            self.f.write(raw.tobytes())
            done += k
        self.offset += n * (2 if dtype == TP.FLOAT16 else 4)
        return self._proto(name, dims, dtype, start, self.offset - start)

    def array_tensor(self, name, arr):
        """A small computed tensor: inline when under 1 KiB, else in the side file."""
        if arr.nbytes < EXTERNAL_MIN_BYTES:
            return numpy_helper.from_array(arr, name)
        start = self.offset
        self.f.write(np.ascontiguousarray(arr).tobytes())
        self.offset += arr.nbytes
        return self._proto(name, list(arr.shape), helper.np_dtype_to_tensor_dtype(arr.dtype), start, arr.nbytes)

    def _proto(self, name, dims, dtype, offset, length):
        t = TP()
        t.name = name
        t.data_type = dtype
        t.dims.extend(dims)
        t.data_location = TP.EXTERNAL
        for k, v in (("location", self.name), ("offset", str(offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        return t

    def close(self):
        self.f.close()


class Builder:
    def __init__(self, side, np_dtype, onnx_dtype):
        self.side = side
        self.nodes = []
        self.inits = []
        self.np_dtype = np_dtype
        self.dt = onnx_dtype
        self.count = 0

    def const(self, name, arr):
        self.inits.append(self.side.array_tensor(name, np.asarray(arr)))
        return name

    def ints(self, name, values):
        return self.const(name, np.array(values, dtype=np.int64))

    def weight(self, name, dims):
        self.inits.append(self.side.random_tensor(name, dims, self.dt))
        return name

    def gamma(self, name, n, rng):
        return self.const(name, rng.uniform(0.75, 1.25, size=n).astype(self.np_dtype))

    def op(self, op_type, inputs, out=None, **attrs):
        self.count += 1
        out = out or f"{op_type.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"node_{op_type}_{self.count}", **attrs))
        return out


def rms_norm(b, x, gamma, eps):
    xf = b.op("Cast", [x], to=TP.FLOAT)
    sq = b.op("Pow", [xf, "two"])
    ms = b.op("ReduceMean", [sq, "axis_last"], keepdims=1, noop_with_empty_axes=0)
    sd = b.op("Sqrt", [b.op("Add", [ms, eps])])
    normed = b.op("Mul", [xf, b.op("Reciprocal", [sd])])
    return b.op("Mul", [gamma, b.op("Cast", [normed], to=b.dt)])


def rotate(b, x, cos, sin, half):
    x1 = b.op("Slice", [x, "zero_1d", half, "three_1d", "one_1d"])
    x2 = b.op("Slice", [x, half, "int_max_1d", "three_1d", "one_1d"])
    rot = b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)
    return b.op("Add", [b.op("Mul", [x, cos]), b.op("Mul", [rot, sin])])


def build(cfg, dtype_name, out_dir, seed):
    L, H, nh, nkv, F, V = (cfg[k] for k in ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab"))
    assert H % nh == 0 and nh % nkv == 0, "hidden must divide by heads, heads by kv heads"
    D = H // nh
    np_dt, dt = (np.float16, TP.FLOAT16) if dtype_name == "fp16" else (np.float32, TP.FLOAT)
    side = SideFile(os.path.join(out_dir, "model.onnx.data"), seed)
    rng = np.random.default_rng(seed + 1)
    b = Builder(side, np_dt, dt)

    # Shared constants (names as the roles they play).
    b.const("zero", np.array(0, np.int64))
    b.const("one", np.array(1, np.int64))
    b.const("true", np.array(True))
    b.const("mask_keep", np.array(0, np_dt))
    b.const("mask_fill", np.array(np.finfo(np_dt).min, np_dt))
    b.const("two", np.array(2.0, np.float32))
    b.const("eps", np.array(1e-5, np.float32))
    b.const("scale", np.array(1.0 / np.sqrt(D), np_dt))
    b.ints("axis_last", [-1])
    b.ints("axes_12", [1, 2])
    b.ints("axes_01", [0, 1])
    b.ints("zero_1d", [0])
    b.ints("one_1d", [1])
    b.ints("two_1d", [2])
    b.ints("three_1d", [3])
    b.ints("int_max_1d", [np.iinfo(np.int64).max])
    b.ints("half_dim", [D // 2])
    b.ints("head_dim", [D])
    b.ints("num_heads", [nh])
    b.ints("kv_heads", [nkv])
    b.ints("n_rep", [nh // nkv])
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, D, 2, dtype=np.float32) / D))
    b.const("inv_freq", inv_freq.reshape(1, D // 2, 1).astype(np.float32))

    embed = b.weight("model.embed_tokens.weight", [V, H])
    # Sizes and the mask (transformers 5: causal And padding, GatherND of the 2-D mask).
    bsz_1d = b.op("Shape", ["input_ids"], "batch_1d", start=0, end=1)
    bsz = b.op("Squeeze", [bsz_1d], "batch")
    kvl_1d = b.op("Shape", ["attention_mask"], "kv_len_1d", start=1, end=2)
    kvl = b.op("Squeeze", [kvl_1d], "kv_len")
    h = b.op("Gather", [embed, "input_ids"], "embedding", axis=0)
    kv_pos = b.op("Range", ["zero", kvl, "one"], "kv_positions")
    keep_pad = b.op("Cast", ["attention_mask"], "mask_bool", to=TP.BOOL)
    b_idx = b.op("Range", ["zero", bsz, "one"], "batch_index")
    b4 = b.op("Unsqueeze", [b.op("Unsqueeze", [b_idx, "axes_12"]), "three_1d"])  # [B,1,1,1]
    pos3 = b.op("Unsqueeze", [kv_pos, "axes_01"])  # [1,1,S]
    q4 = b.op("Unsqueeze", [pos3, "three_1d"])  # [1,1,S,1]
    k4 = b.op("Unsqueeze", [pos3, "two_1d"])  # [1,1,1,S]
    causal = b.op("And", ["true", b.op("LessOrEqual", [k4, q4])])
    both = b.op("Shape", [b.op("Max", [b4, k4])], start=0)
    bi = b.op("Unsqueeze", [b.op("Expand", [b4, both]), "axis_last"])
    ki = b.op("Unsqueeze", [b.op("Expand", [k4, both]), "axis_last"])
    pad = b.op("GatherND", [keep_pad, b.op("Concat", [bi, ki], axis=-1)], batch_dims=0)
    mask = b.op("Where", [b.op("And", [causal, pad]), "mask_keep", "mask_fill"], "attn_mask")
    # Rotary tables, computed in fp32 and cast to the model's dtype (HF's cos.to(x.dtype)).
    freqs = b.op("Transpose", [b.op("MatMul", ["inv_freq", b.op("Cast", [pos3], to=TP.FLOAT)])], perm=[0, 2, 1])
    emb = b.op("Concat", [freqs, freqs], axis=-1)
    cos = b.op("Unsqueeze", [b.op("Cast", [b.op("Cos", [emb])], to=dt), "one_1d"], "cos")
    sin = b.op("Unsqueeze", [b.op("Cast", [b.op("Sin", [emb])], to=dt), "one_1d"], "sin")
    heads_shape = b.op("Concat", [bsz_1d, kvl_1d, "axis_last", "head_dim"], "heads_shape", axis=0)
    rep_shape = b.op("Concat", [bsz_1d, "kv_heads", "n_rep", kvl_1d, "head_dim"], "repeat_shape", axis=0)
    all_heads = b.op("Concat", [bsz_1d, "num_heads", kvl_1d, "head_dim"], "all_heads_shape", axis=0)
    merged = b.op("Concat", [bsz_1d, kvl_1d, "axis_last"], "merged_shape", axis=0)

    def heads(x):
        return b.op("Transpose", [b.op("Reshape", [x, heads_shape], allowzero=1)], perm=[0, 2, 1, 3])

    def repeat_kv(x):
        e = b.op("Expand", [b.op("Unsqueeze", [x, "two_1d"]), rep_shape])
        return b.op("Reshape", [e, all_heads], allowzero=1)

    for i in range(L):
        p = f"model.layers.{i}."
        x = rms_norm(b, h, b.gamma(p + "input_layernorm.weight", H, rng), "eps")
        q = heads(b.op("MatMul", [x, b.weight(p + "self_attn.q_proj.weight_t", [H, nh * D])]))
        k = heads(b.op("MatMul", [x, b.weight(p + "self_attn.k_proj.weight_t", [H, nkv * D])]))
        v = heads(b.op("MatMul", [x, b.weight(p + "self_attn.v_proj.weight_t", [H, nkv * D])]))
        q = rotate(b, q, cos, sin, "half_dim")
        k = rotate(b, k, cos, sin, "half_dim")
        kt = b.op("Transpose", [repeat_kv(k)], perm=[0, 1, 3, 2])
        scores = b.op("Add", [b.op("Mul", [b.op("MatMul", [q, kt]), "scale"]), mask])
        probs = b.op("Cast", [b.op("Softmax", [b.op("Cast", [scores], to=TP.FLOAT)], axis=-1)], to=dt)
        ctx = b.op("Transpose", [b.op("MatMul", [probs, repeat_kv(v)])], perm=[0, 2, 1, 3])
        attn = b.op("MatMul", [b.op("Reshape", [ctx, merged], allowzero=1),
                               b.weight(p + "self_attn.o_proj.weight_t", [nh * D, H])])
        h = b.op("Add", [h, attn])
        x = rms_norm(b, h, b.gamma(p + "post_attention_layernorm.weight", H, rng), "eps")
        g = b.op("MatMul", [x, b.weight(p + "mlp.gate_proj.weight_t", [H, F])])
        up = b.op("MatMul", [x, b.weight(p + "mlp.up_proj.weight_t", [H, F])])
        act = b.op("Mul", [b.op("Mul", [g, b.op("Sigmoid", [g])]), up])
        h = b.op("Add", [h, b.op("MatMul", [act, b.weight(p + "mlp.down_proj.weight_t", [F, H])])])
    x = rms_norm(b, h, b.gamma("model.norm.weight", H, rng), "eps")
    b.op("MatMul", [x, b.weight("lm_head.weight_t", [H, V])], "logits")
    side.close()

    graph = helper.make_graph(
        b.nodes, "big_decoder",
        [helper.make_tensor_value_info("input_ids", TP.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TP.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", dt, ["batch", "seq", V])],
        initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10,
                              producer_name="fuseopt-make_big_model")
    with open(os.path.join(out_dir, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString(deterministic=True))
    return side.offset


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--preset", default="7b", choices=sorted(PRESETS))
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "fp32"])
    ap.add_argument("--seed", type=int, default=0)
    for k in ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab"):
        ap.add_argument("--" + k.replace("_", "-"), type=int, dest=k)
    a = ap.parse_args()
    cfg = dict(PRESETS[a.preset])
    cfg.update({k: getattr(a, k) for k in cfg if getattr(a, k) is not None})
    os.makedirs(a.out_dir, exist_ok=True)
    n = build(cfg, a.dtype, a.out_dir, a.seed)
    print(f"{a.out_dir}/model.onnx: {cfg}, {a.dtype}, {n / 1e9:.2f} GB of weights in model.onnx.data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
