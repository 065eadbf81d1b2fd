#!/usr/bin/env python3
"""Writes small synthetic ONNX test graphs that real exports do not cover.

    python3 models/make_synthetic.py [--out models/synthetic] [--only NAME,...]

Each model goes to <out>/<name>/model.onnx with test_data_set_0/ (input_N.pb,
output_N.pb: ONNX backend-test layout, outputs computed by ONNX Runtime on the
model as written, every graph rewrite disabled). Needs pip `onnx`, `numpy` and
`onnxruntime`. Generation is deterministic (fixed seeds, legacy RandomState
stream, deterministic serialization): regenerating gives identical bytes
(tests/py/test_synthetic_models.py checks that).

Positive models (fusions may fire; outputs must match):
  attn_sdpa_sqrt_scale    torch SDPA decomposition: scale computed from Shape,
                          sqrt(scale) multiplied into both Q and Kᵀ; HF additive mask
  attn_masked_row         Where(bool mask, scores, finfo.min) with a fully masked
                          batch row (the original gives a uniform row, not NaN)
  attn_gqa                grouped-query attention (4 query heads, 2 kv heads,
                          Unsqueeze/Expand/Reshape repeat of K and V)
  attn_causal_trilu       causal mask built at run time: ConstantOfShape + Trilu
  attn_t5_bias            T5: no scale, additive relative position bias (Gather of
                          a bucket table)
  bert_block_fp16         float16 BERT layer: attention, residual + LayerNormalization,
                          erf-GELU FFN
  external_data_mlp       weights in the side file model.onnx.data (relative location)
  if_outer_scope          If whose branches (and a nested If) read outer values that
                          nothing else reads (DCE must keep them); two test data sets
KV-cache decoders (past_key/past_value [batch, kv_heads, past, Dh] in, present out,
attention_mask [batch, past + seq] (Optimum's dim names); test_data_set_0 decodes one token (S_q = 1),
test_data_set_1 appends 3 tokens (S_q > 1, causal bottom-right); batch 2 with left
padding inside the past):
  kv_gpt2_mha             GPT-2 style MHA, HF (1 - mask) * min padding + a causal tril
                          buffer sliced [S_kv - S_q : S_kv, :S_kv] (transformers 4)
  kv_llama_gqa            Llama style GQA (4 query / 2 kv heads, repeat_kv after the
                          cache Concat), transformers-5 bool mask: kv_idx <= cache_position,
                          GatherND of attention_mask at (b, kv), Where(keep, 0, min)
  kv_llama_total          kv_llama_gqa with the mask / present length named "total" (not past + seq)
  kv_mqa                  multi-query (one kv head broadcast by the MatMuls), HF padding
Negative models (a fusion must NOT fire; the report names the rule):
  neg_bias_non_last_axis  MatMul + bias [S, 1]                  FusedMatMul rule 3
  neg_nonconst_weight     MatMul weight is a graph input        FusedMatMul rule 2
  neg_interior_used_twice Add -> Relu, the Add also read by Sigmoid  AddRelu rule 1
  neg_cast_precision      RMSNorm computed in float16 on a float32 input  RMSNorm rule 5
  neg_layernorm_axis      LayerNorm primitives reducing axis 1  LayerNorm rule 6
"""
import argparse
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

IR_VERSION = 8
F32_MIN = float(np.finfo(np.float32).min)


# ---------------------------------------------------------------- helpers

class G:
    """A tiny graph builder: nodes get sequential names, initializers are
    created from numpy arrays."""

    def __init__(self, seed):
        self.rs = np.random.RandomState(seed)
        self.nodes, self.inits = [], []
        self.count = 0

    def w(self, name, *shape, scale=0.3, dtype=np.float32):
        a = (self.rs.standard_normal(shape) * scale).astype(dtype)
        return self.const(name, a)

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, n_out=1, name=None, **attrs):
        self.count += 1
        base = name or f"{op_type.lower()}_{self.count}"
        outs = [f"{base}_out{i}" if n_out > 1 else f"{base}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=base, **attrs))
        return outs if n_out > 1 else outs[0]

    def model(self, name, inputs, outputs, opset=17, extra_opsets=()):
        g = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *extra_opsets],
                              producer_name="fuseopt models/make_synthetic.py", producer_version="1")
        m.ir_version = IR_VERSION
        m.doc_string = f"synthetic test model '{name}' (fuseopt)"
        return m


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def linear(g, x, k, n, tag, dtype=np.float32):
    mm = g.op("MatMul", [x, g.w(f"{tag}.weight", k, n, dtype=dtype)], name=f"{tag}.matmul")
    return g.op("Add", [mm, g.w(f"{tag}.bias", n, scale=0.1, dtype=dtype)], name=f"{tag}.add")


def split_heads(g, x, heads, dim, tag):
    """[B, S, heads*dim] -> [B, heads, S, dim] (Reshape with 0 = copy, Transpose)."""
    shape = g.const(f"{tag}.heads_shape", np.array([0, 0, heads, dim], np.int64))
    r = g.op("Reshape", [x, shape], name=f"{tag}.reshape")
    return g.op("Transpose", [r], name=f"{tag}.transpose", perm=[0, 2, 1, 3])


def merge_heads(g, ctx, width, tag):
    t = g.op("Transpose", [ctx], name=f"{tag}.transpose", perm=[0, 2, 1, 3])
    shape = g.const(f"{tag}.merge_shape", np.array([0, 0, width], np.int64))
    return g.op("Reshape", [t, shape], name=f"{tag}.reshape")


def hf_additive_mask(g, mask, dtype=np.float32, min_value=F32_MIN):
    """HF get_extended_attention_mask: (1 - mask[:, None, None, :]) * finfo.min."""
    u = g.op("Unsqueeze", [mask, g.const("mask.axes", np.array([1, 2], np.int64))], name="mask.unsqueeze")
    onnx_dtype = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    c = g.op("Cast", [u], name="mask.cast", to=onnx_dtype)
    inv = g.op("Sub", [g.const("mask.one", np.array(1.0, dtype)), c], name="mask.sub")
    return g.op("Mul", [inv, g.const("mask.min", np.array(min_value, dtype))], name="mask.mul")


def attention_core(g, q4, kt, v4, tag, scale_div=None, bias=None):
    scores = g.op("MatMul", [q4, kt], name=f"{tag}.qk")
    if scale_div is not None:
        scores = g.op("Div", [scores, g.const(f"{tag}.scale", np.array(scale_div, np.float32))], name=f"{tag}.div")
    if bias is not None:
        scores = g.op("Add", [scores, bias], name=f"{tag}.add_mask")
    p = g.op("Softmax", [scores], name=f"{tag}.softmax", axis=-1)
    return g.op("MatMul", [p, v4], name=f"{tag}.pv")


def int_mask(rs, b, s, fully_masked_row=None):
    m = np.ones((b, s), np.int64)
    m[0, s - 2:] = 0  # padding at the end of the first sequence
    if fully_masked_row is not None:
        m[fully_masked_row, :] = 0
    return m


# ---------------------------------------------------------------- positive models

def attn_sdpa_sqrt_scale():
    B, S, D, H = 2, 5, 16, 2
    Dh = D // H
    g = G(101)
    q = split_heads(g, linear(g, "x", D, D, "q"), H, Dh, "q")
    k = split_heads(g, linear(g, "x", D, D, "k"), H, Dh, "k")
    v = split_heads(g, linear(g, "x", D, D, "v"), H, Dh, "v")
    # torch.onnx's scaled_dot_product_attention: scale = 1/sqrt(E) from the shape,
    # sqrt(scale) applied to Q and to Kᵀ separately (numerically friendlier).
    shp = g.op("Shape", [q], name="sdpa.shape")
    last = g.op("Slice", [shp, g.const("sdpa.start", np.array([-1], np.int64)),
                          g.const("sdpa.end", np.array([np.iinfo(np.int64).max], np.int64))], name="sdpa.slice")
    e = g.op("Cast", [last], name="sdpa.cast", to=TP.FLOAT)
    inv = g.op("Div", [g.const("sdpa.one", np.array([1.0], np.float32)), g.op("Sqrt", [e], name="sdpa.sqrt_e")],
               name="sdpa.inv")
    sqrt_scale = g.op("Sqrt", [inv], name="sdpa.sqrt_scale")
    qs = g.op("Mul", [q, sqrt_scale], name="sdpa.q_scale")
    kt = g.op("Transpose", [k], name="sdpa.k_transpose", perm=[0, 1, 3, 2])
    ks = g.op("Mul", [kt, sqrt_scale], name="sdpa.k_scale")
    ctx = attention_core(g, qs, ks, v, "sdpa", bias=hf_additive_mask(g, "attention_mask"))
    y = linear(g, merge_heads(g, ctx, D, "out"), D, D, "o")
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y.identity"))
    m = g.model("attn_sdpa_sqrt_scale",
                [vi("x", TP.FLOAT, ["batch", "seq", D]), vi("attention_mask", TP.INT64, ["batch", "seq"])],
                [vi("y", TP.FLOAT, ["batch", "seq", D])], opset=18)
    rs = np.random.RandomState(1)
    return m, [[rs.standard_normal((B, S, D)).astype(np.float32), int_mask(rs, B, S)]]


def attn_masked_row():
    B, S, D, H = 3, 4, 8, 2
    Dh = D // H
    g = G(102)
    q = split_heads(g, linear(g, "x", D, D, "q"), H, Dh, "q")
    # K as [B, H, Dh, S] in one Transpose(0, 2, 3, 1) after the head Reshape.
    kr = g.op("Reshape", [linear(g, "x", D, D, "k"), g.const("k.heads_shape", np.array([0, 0, H, Dh], np.int64))],
              name="k.reshape")
    k = g.op("Transpose", [kr], name="k.transpose", perm=[0, 2, 3, 1])
    v = split_heads(g, linear(g, "x", D, D, "v"), H, Dh, "v")
    scores = g.op("MatMul", [q, k], name="attn.qk")
    scores = g.op("Mul", [scores, g.const("attn.scale", np.array(1.0 / np.sqrt(Dh), np.float32))], name="attn.scale")
    u = g.op("Unsqueeze", ["attention_mask", g.const("mask.axes", np.array([1, 2], np.int64))], name="mask.unsqueeze")
    keep = g.op("Cast", [u], name="mask.to_bool", to=TP.BOOL)
    masked = g.op("Where", [keep, scores, g.const("attn.fill", np.array(F32_MIN, np.float32))], name="attn.where")
    p = g.op("Softmax", [masked], name="attn.softmax", axis=-1)
    ctx = g.op("MatMul", [p, v], name="attn.pv")
    merged = merge_heads(g, ctx, D, "out")
    g.nodes.append(helper.make_node("Identity", [merged], ["y"], name="y.identity"))
    m = g.model("attn_masked_row",
                [vi("x", TP.FLOAT, ["batch", "seq", D]), vi("attention_mask", TP.INT64, ["batch", "seq"])],
                [vi("y", TP.FLOAT, ["batch", "seq", D])])
    rs = np.random.RandomState(2)
    return m, [[rs.standard_normal((B, S, D)).astype(np.float32), int_mask(rs, B, S, fully_masked_row=1)]]


def attn_gqa():
    B, S, D, H, Hkv, Dh = 2, 5, 16, 4, 2, 4
    g = G(103)
    q = split_heads(g, linear(g, "x", D, H * Dh, "q"), H, Dh, "q")

    def repeat_kv(x, tag):  # Llama repeat_kv: [B, Hkv, S, Dh] -> [B, H, S, Dh]
        u = g.op("Unsqueeze", [x, g.const(f"{tag}.rep_axes", np.array([2], np.int64))], name=f"{tag}.rep_unsqueeze")
        e = g.op("Expand", [u, g.const(f"{tag}.rep_shape", np.array([1, 1, H // Hkv, 1, 1], np.int64))],
                 name=f"{tag}.rep_expand")
        return g.op("Reshape", [e, g.const(f"{tag}.rep_target", np.array([0, H, -1, Dh], np.int64))],
                    name=f"{tag}.rep_reshape")

    k = repeat_kv(split_heads(g, linear(g, "x", D, Hkv * Dh, "k"), Hkv, Dh, "k"), "k")
    v = repeat_kv(split_heads(g, linear(g, "x", D, Hkv * Dh, "v"), Hkv, Dh, "v"), "v")
    kt = g.op("Transpose", [k], name="attn.k_transpose", perm=[0, 1, 3, 2])
    ctx = attention_core(g, q, kt, v, "attn", scale_div=float(np.sqrt(Dh)), bias=hf_additive_mask(g, "attention_mask"))
    y = linear(g, merge_heads(g, ctx, H * Dh, "out"), H * Dh, D, "o")
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y.identity"))
    m = g.model("attn_gqa",
                [vi("x", TP.FLOAT, ["batch", "seq", D]), vi("attention_mask", TP.INT64, ["batch", "seq"])],
                [vi("y", TP.FLOAT, ["batch", "seq", D])])
    rs = np.random.RandomState(3)
    return m, [[rs.standard_normal((B, S, D)).astype(np.float32), int_mask(rs, B, S)]]


def attn_causal_trilu():
    B, S, D, H = 2, 6, 8, 2
    Dh = D // H
    g = G(104)
    q = split_heads(g, linear(g, "x", D, D, "q"), H, Dh, "q")
    k = split_heads(g, linear(g, "x", D, D, "k"), H, Dh, "k")
    v = split_heads(g, linear(g, "x", D, D, "v"), H, Dh, "v")
    # Causal mask from the run-time sequence length: [S, S], finfo.min above the diagonal.
    seq = g.op("Gather", [g.op("Shape", [ "x"], name="causal.shape"),
                          g.const("causal.seq_index", np.array([1], np.int64))], name="causal.seq", axis=0)
    ss = g.op("Concat", [seq, seq], name="causal.square", axis=0)
    full = g.op("ConstantOfShape", [ss], name="causal.fill",
                value=numpy_helper.from_array(np.array([F32_MIN], np.float32)))
    causal = g.op("Trilu", [full, g.const("causal.k", np.array(1, np.int64))], name="causal.trilu", upper=1)
    kt = g.op("Transpose", [k], name="attn.k_transpose", perm=[0, 1, 3, 2])
    ctx = attention_core(g, q, kt, v, "attn", scale_div=float(np.sqrt(Dh)), bias=causal)
    merged = merge_heads(g, ctx, D, "out")
    g.nodes.append(helper.make_node("Identity", [merged], ["y"], name="y.identity"))
    m = g.model("attn_causal_trilu", [vi("x", TP.FLOAT, ["batch", "seq", D])], [vi("y", TP.FLOAT, ["batch", "seq", D])])
    rs = np.random.RandomState(4)
    return m, [[rs.standard_normal((B, S, D)).astype(np.float32)]]


def attn_t5_bias():
    B, S, D, H, buckets = 2, 5, 8, 2, 6
    Dh = D // H
    g = G(105)
    q = split_heads(g, g.op("MatMul", ["x", g.w("q.weight", D, D)], name="q.matmul"), H, Dh, "q")
    k = split_heads(g, g.op("MatMul", ["x", g.w("k.weight", D, D)], name="k.matmul"), H, Dh, "k")
    v = split_heads(g, g.op("MatMul", ["x", g.w("v.weight", D, D)], name="v.matmul"), H, Dh, "v")
    rel = np.arange(S)[None, :] - np.arange(S)[:, None]
    bucket = np.clip(rel + buckets // 2, 0, buckets - 1).astype(np.int64)
    table = g.w("rel_bias.table", buckets, H, scale=1.0)
    pb = g.op("Gather", [table, g.const("rel_bias.buckets", bucket)], name="rel_bias.gather", axis=0)  # [S, S, H]
    pb = g.op("Transpose", [pb], name="rel_bias.transpose", perm=[2, 0, 1])
    pb = g.op("Unsqueeze", [pb, g.const("rel_bias.axes", np.array([0], np.int64))], name="rel_bias.unsqueeze")
    kt = g.op("Transpose", [k], name="attn.k_transpose", perm=[0, 1, 3, 2])
    ctx = attention_core(g, q, kt, v, "attn", bias=pb)  # T5: no 1/sqrt(d) scale
    y = g.op("MatMul", [merge_heads(g, ctx, D, "out"), g.w("o.weight", D, D)], name="o.matmul")
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y.identity"))
    m = g.model("attn_t5_bias", [vi("x", TP.FLOAT, ["batch", S, D])], [vi("y", TP.FLOAT, ["batch", S, D])])
    rs = np.random.RandomState(5)
    return m, [[rs.standard_normal((B, S, D)).astype(np.float32)]]


def bert_block_fp16():
    B, S, D, H, F = 2, 5, 16, 2, 32
    Dh = D // H
    f16 = np.float16
    g = G(106)
    q = split_heads(g, linear(g, "x", D, D, "q", f16), H, Dh, "q")
    k = split_heads(g, linear(g, "x", D, D, "k", f16), H, Dh, "k")
    v = split_heads(g, linear(g, "x", D, D, "v", f16), H, Dh, "v")
    kt = g.op("Transpose", [k], name="attn.k_transpose", perm=[0, 1, 3, 2])
    scores = g.op("MatMul", [q, kt], name="attn.qk")
    scores = g.op("Div", [scores, g.const("attn.scale", np.array(np.sqrt(Dh), f16))], name="attn.div")
    scores = g.op("Add", [scores, hf_additive_mask(g, "attention_mask", f16, float(np.finfo(f16).min))],
                  name="attn.add_mask")
    p = g.op("Softmax", [scores], name="attn.softmax", axis=-1)
    ctx = g.op("MatMul", [p, v], name="attn.pv")
    attn_out = linear(g, merge_heads(g, ctx, D, "out"), D, D, "o", f16)

    def layer_norm(x, tag):
        return g.op("LayerNormalization", [x, g.const(f"{tag}.gamma", (1 + 0.1 * g.rs.standard_normal(D)).astype(f16)),
                                           g.const(f"{tag}.beta", (0.1 * g.rs.standard_normal(D)).astype(f16))],
                    name=f"{tag}.ln", axis=-1, epsilon=1e-12)

    h = layer_norm(g.op("Add", [attn_out, "x"], name="attn.residual"), "ln1")
    f = linear(g, h, D, F, "ffn1", f16)
    # erf GELU: 0.5 * x * (1 + erf(x / sqrt(2)))
    e = g.op("Erf", [g.op("Div", [f, g.const("gelu.sqrt2", np.array(np.sqrt(2.0), f16))], name="gelu.div")],
             name="gelu.erf")
    e1 = g.op("Add", [e, g.const("gelu.one", np.array(1.0, f16))], name="gelu.add")
    gl = g.op("Mul", [g.op("Mul", [f, e1], name="gelu.mul"), g.const("gelu.half", np.array(0.5, f16))],
              name="gelu.half_mul")
    f2 = linear(g, gl, F, D, "ffn2", f16)
    out = layer_norm(g.op("Add", [f2, h], name="ffn.residual"), "ln2")
    g.nodes.append(helper.make_node("Identity", [out], ["y"], name="y.identity"))
    m = g.model("bert_block_fp16",
                [vi("x", TP.FLOAT16, ["batch", "seq", D]), vi("attention_mask", TP.INT64, ["batch", "seq"])],
                [vi("y", TP.FLOAT16, ["batch", "seq", D])])
    rs = np.random.RandomState(6)
    return m, [[rs.standard_normal((B, S, D)).astype(f16), int_mask(rs, B, S)]]


def external_data_mlp():
    g = G(107)
    h = g.op("Relu", [linear(g, "x", 32, 32, "fc1")], name="fc1.relu")
    y = linear(g, h, 32, 16, "fc2")
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y.identity"))
    m = g.model("external_data_mlp", [vi("x", TP.FLOAT, ["batch", 32])], [vi("y", TP.FLOAT, ["batch", 16])])
    rs = np.random.RandomState(7)
    return m, [[rs.standard_normal((3, 32)).astype(np.float32)]]


def if_outer_scope():
    g = G(108)
    # 'scaled' and 'gate' are read only inside the branches: DCE must keep them.
    scaled = g.op("Mul", ["x", g.const("two", np.array(2.0, np.float32))], name="outer.scaled")
    gate = g.op("Sigmoid", ["x"], name="outer.gate")
    inner_then = helper.make_graph([helper.make_node("Mul", [scaled, gate], ["it"], name="inner.then_mul")],
                                   "inner_then", [], [vi("it", TP.FLOAT, [4])])
    inner_else = helper.make_graph([helper.make_node("Sub", [scaled, gate], ["ie"], name="inner.else_sub")],
                                   "inner_else", [], [vi("ie", TP.FLOAT, [4])])
    then_g = helper.make_graph(
        [helper.make_node("Greater", ["x_sum", "zero_f"], ["pos"], name="then.greater"),
         helper.make_node("If", ["pos"], ["nested"], name="then.nested_if", then_branch=inner_then,
                          else_branch=inner_else),
         helper.make_node("Add", ["nested", "one_f"], ["t"], name="then.add")],
        "then", [], [vi("t", TP.FLOAT, [4])])
    else_g = helper.make_graph([helper.make_node("Neg", [scaled], ["e"], name="else.neg")], "else", [],
                               [vi("e", TP.FLOAT, [4])])
    g.nodes.append(helper.make_node("ReduceSum", ["x"], ["x_sum"], name="outer.sum", keepdims=0))
    g.const("zero_f", np.array(0.0, np.float32))
    g.const("one_f", np.array(1.0, np.float32))
    g.nodes.append(helper.make_node("If", ["cond"], ["branch"], name="outer.if", then_branch=then_g,
                                    else_branch=else_g))
    g.nodes.append(helper.make_node("Relu", ["branch"], ["y"], name="y.relu"))
    m = g.model("if_outer_scope", [vi("x", TP.FLOAT, [4]), vi("cond", TP.BOOL, [])], [vi("y", TP.FLOAT, [4])])
    rs = np.random.RandomState(8)
    x = rs.standard_normal(4).astype(np.float32)
    return m, [[x, np.array(True)], [x, np.array(False)], [np.abs(x) * -1.0, np.array(True)]]


# ---------------------------------------------------------------- negative models

def neg_bias_non_last_axis():
    g = G(201)
    mm = g.op("MatMul", ["x", g.w("fc.weight", 8, 6)], name="fc.matmul")
    y = g.op("Add", [mm, g.w("fc.bias_rows", 4, 1, scale=0.5)], name="fc.add")  # broadcasts along S, not N
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y.identity"))
    m = g.model("neg_bias_non_last_axis", [vi("x", TP.FLOAT, ["batch", 4, 8])], [vi("y", TP.FLOAT, ["batch", 4, 6])])
    rs = np.random.RandomState(9)
    return m, [[rs.standard_normal((2, 4, 8)).astype(np.float32)]]


def neg_nonconst_weight():
    g = G(202)
    mm = g.op("MatMul", ["x", "w"], name="fc.matmul")
    y = g.op("Add", [mm, g.w("fc.bias", 6, scale=0.5)], name="fc.add")
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y.identity"))
    m = g.model("neg_nonconst_weight", [vi("x", TP.FLOAT, ["batch", 4, 8]), vi("w", TP.FLOAT, [8, 6])],
                [vi("y", TP.FLOAT, ["batch", 4, 6])])
    rs = np.random.RandomState(10)
    return m, [[rs.standard_normal((2, 4, 8)).astype(np.float32), rs.standard_normal((8, 6)).astype(np.float32)]]


def neg_interior_used_twice():
    g = G(203)
    s = g.op("Add", ["a", "b"], name="sum.add")
    g.nodes.append(helper.make_node("Relu", [s], ["y"], name="y.relu"))
    g.nodes.append(helper.make_node("Sigmoid", [s], ["z"], name="z.sigmoid"))  # second reader of the interior value
    m = g.model("neg_interior_used_twice", [vi("a", TP.FLOAT, [2, 3, 4]), vi("b", TP.FLOAT, [2, 3, 4])],
                [vi("y", TP.FLOAT, [2, 3, 4]), vi("z", TP.FLOAT, [2, 3, 4])])
    rs = np.random.RandomState(11)
    return m, [[rs.standard_normal((2, 3, 4)).astype(np.float32), rs.standard_normal((2, 3, 4)).astype(np.float32)]]


def neg_cast_precision():
    D = 8
    g = G(204)
    # RMSNorm whose statistics run in float16 on a float32 input: fusing it would
    # compute in float32 and change the numbers.
    xc = g.op("Cast", ["x"], name="rms.cast_in", to=TP.FLOAT16)
    sq = g.op("Pow", [xc, g.const("rms.two", np.array(2.0, np.float16))], name="rms.pow")
    ms = g.op("ReduceMean", [sq], name="rms.mean", axes=[-1], keepdims=1)
    sd = g.op("Sqrt", [g.op("Add", [ms, g.const("rms.eps", np.array(1e-3, np.float16))], name="rms.add_eps")],
              name="rms.sqrt")
    n = g.op("Mul", [xc, g.op("Reciprocal", [sd], name="rms.recip")], name="rms.normed")
    back = g.op("Cast", [n], name="rms.cast_out", to=TP.FLOAT)
    y = g.op("Mul", [back, g.const("rms.gamma", (1 + 0.1 * g.rs.standard_normal(D)).astype(np.float32))],
             name="rms.scale")
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y.identity"))
    m = g.model("neg_cast_precision", [vi("x", TP.FLOAT, ["batch", 3, D])], [vi("y", TP.FLOAT, ["batch", 3, D])])
    rs = np.random.RandomState(12)
    return m, [[rs.standard_normal((2, 3, D)).astype(np.float32)]]


def neg_layernorm_axis():
    g = G(205)
    mean = g.op("ReduceMean", ["x"], name="ln.mean", axes=[1], keepdims=1)  # over S, not the hidden axis
    d = g.op("Sub", ["x", mean], name="ln.sub")
    var = g.op("ReduceMean", [g.op("Pow", [d, g.const("ln.two", np.array(2.0, np.float32))], name="ln.pow")],
               name="ln.var", axes=[1], keepdims=1)
    sd = g.op("Sqrt", [g.op("Add", [var, g.const("ln.eps", np.array(1e-5, np.float32))], name="ln.add_eps")],
              name="ln.sqrt")
    n = g.op("Div", [d, sd], name="ln.div")
    s = g.op("Mul", [n, g.w("ln.gamma", 8, scale=0.5)], name="ln.scale")
    y = g.op("Add", [s, g.w("ln.beta", 8, scale=0.5)], name="ln.shift")
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y.identity"))
    m = g.model("neg_layernorm_axis", [vi("x", TP.FLOAT, ["batch", 4, 8])], [vi("y", TP.FLOAT, ["batch", 4, 8])])
    rs = np.random.RandomState(13)
    return m, [[rs.standard_normal((2, 4, 8)).astype(np.float32)]]


# ---------------------------------------------------------------- KV-cache decoders

# Optimum's dim names: the mask / present length is written as the sum it is.
_B, _S, _P, _T = "batch_size", "sequence_length", "past_sequence_length", "past_sequence_length + sequence_length"


def _kv_inputs(D, Hkv, Dh):
    return [vi("x", TP.FLOAT, [_B, _S, D]), vi("attention_mask", TP.INT64, [_B, _T]),
            vi("past_key", TP.FLOAT, [_B, Hkv, _P, Dh]), vi("past_value", TP.FLOAT, [_B, Hkv, _P, Dh])]


def _kv_outputs(D, Hkv, Dh):
    return [vi("y", TP.FLOAT, [_B, _S, D]), vi("present_key", TP.FLOAT, [_B, Hkv, _T, Dh]),
            vi("present_value", TP.FLOAT, [_B, Hkv, _T, Dh])]


def _kv_data(seed, B, D, Hkv, Dh):
    """Set 0: one new token after 5 cached; set 1: 3 new tokens after 4 cached. Row 1 is
    left-padded (its first 2 cached positions are padding); no query row is fully masked."""
    rs = np.random.RandomState(seed)
    sets = []
    for past, seq in ((5, 1), (4, 3)):
        m = np.ones((B, past + seq), np.int64)
        m[1, :2] = 0
        sets.append([rs.standard_normal((B, seq, D)).astype(np.float32), m,
                     rs.standard_normal((B, Hkv, past, Dh)).astype(np.float32),
                     rs.standard_normal((B, Hkv, past, Dh)).astype(np.float32)])
    return sets


def _cache(g, past, new, out):
    g.nodes.append(helper.make_node("Concat", [past, new], [out], name=f"{out}.concat", axis=2))
    return out


def kv_gpt2_mha():
    B, D, H, Dh = 2, 8, 2, 4
    g = G(110)
    q = split_heads(g, linear(g, "x", D, D, "q"), H, Dh, "q")
    k = _cache(g, "past_key", split_heads(g, linear(g, "x", D, D, "k"), H, Dh, "k"), "present_key")
    v = _cache(g, "past_value", split_heads(g, linear(g, "x", D, D, "v"), H, Dh, "v"), "present_value")
    # Causal: tril buffer [1, 1, 16, 16] sliced to the last S_q rows and the first S_kv columns.
    shp_q = g.op("Shape", ["x"], name="causal.shape_q")
    sq = g.op("Gather", [shp_q, g.const("causal.i1", np.array([1], np.int64))], name="causal.sq", axis=0)
    skv = g.op("Gather", [g.op("Shape", [k], name="causal.shape_k"), g.const("causal.i2", np.array([2], np.int64))],
               name="causal.skv", axis=0)
    start = g.op("Sub", [skv, sq], name="causal.start")
    buf = g.const("causal.buffer", np.tril(np.ones((16, 16), np.float32))[None, None])
    rows = g.op("Slice", [buf, start, skv, g.const("causal.ax2", np.array([2], np.int64))], name="causal.rows")
    cols = g.op("Slice", [rows, g.const("causal.zero", np.array([0], np.int64)), skv,
                          g.const("causal.ax3", np.array([3], np.int64))], name="causal.cols")
    keep = g.op("Cast", [cols], name="causal.bool", to=TP.BOOL)
    kt = g.op("Transpose", [k], name="attn.k_transpose", perm=[0, 1, 3, 2])
    scores = g.op("Div", [g.op("MatMul", [q, kt], name="attn.qk"), g.const("attn.scale", np.array(np.sqrt(Dh), np.float32))],
                  name="attn.div")
    scores = g.op("Where", [keep, scores, g.const("causal.min", np.array(F32_MIN, np.float32))], name="attn.causal")
    scores = g.op("Add", [scores, hf_additive_mask(g, "attention_mask")], name="attn.add_mask")
    p = g.op("Softmax", [scores], name="attn.softmax", axis=-1)
    ctx = g.op("MatMul", [p, v], name="attn.pv")
    y = linear(g, merge_heads(g, ctx, D, "out"), D, D, "o")
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y.identity"))
    m = g.model("kv_gpt2_mha", _kv_inputs(D, H, Dh), _kv_outputs(D, H, Dh))
    return m, _kv_data(10, B, D, H, Dh)


def kv_llama_gqa():
    B, D, H, Hkv, Dh = 2, 16, 4, 2, 4
    g = G(111)
    q = split_heads(g, linear(g, "x", D, H * Dh, "q"), H, Dh, "q")

    def repeat_kv(x, tag):
        u = g.op("Unsqueeze", [x, g.const(f"{tag}.rep_axes", np.array([2], np.int64))], name=f"{tag}.rep_unsqueeze")
        e = g.op("Expand", [u, g.const(f"{tag}.rep_shape", np.array([1, 1, H // Hkv, 1, 1], np.int64))],
                 name=f"{tag}.rep_expand")
        return g.op("Reshape", [e, g.const(f"{tag}.rep_target", np.array([0, H, -1, Dh], np.int64))],
                    name=f"{tag}.rep_reshape")

    k = repeat_kv(_cache(g, "past_key", split_heads(g, linear(g, "x", D, Hkv * Dh, "k"), Hkv, Dh, "k"), "present_key"), "k")
    v = repeat_kv(_cache(g, "past_value", split_heads(g, linear(g, "x", D, Hkv * Dh, "v"), Hkv, Dh, "v"), "present_value"),
                  "v")
    # transformers 5 masking_utils: cache_position = Range(past, past + seq), kv_idx = Range(0, total).
    def dim(x, i, tag):
        return g.op("Squeeze", [g.op("Shape", [x], name=f"{tag}.shape", start=i, end=i + 1)], name=f"{tag}.squeeze")
    past = dim("past_key", 2, "mask.past")
    seq = dim("x", 1, "mask.seq")
    total = dim("attention_mask", 1, "mask.total")
    batch = dim("x", 0, "mask.batch")
    zero, one = g.const("mask.zero", np.array(0, np.int64)), g.const("mask.one", np.array(1, np.int64))
    cache_pos = g.op("Range", [past, g.op("Add", [past, seq], name="mask.end"), one], name="mask.cache_position")
    kv_idx = g.op("Range", [zero, total, one], name="mask.kv_range")
    kv4 = g.op("Unsqueeze", [kv_idx, g.const("mask.kv_axes", np.array([0, 1, 2], np.int64))], name="mask.kv4")
    q4 = g.op("Unsqueeze", [cache_pos, g.const("mask.q_axes", np.array([0, 1, 3], np.int64))], name="mask.q4")
    causal = g.op("LessOrEqual", [kv4, q4], name="mask.causal")
    b4 = g.op("Unsqueeze", [g.op("Range", [zero, batch, one], name="mask.b_range"),
                            g.const("mask.b_axes", np.array([1, 2, 3], np.int64))], name="mask.b4")
    grid = g.op("Shape", [g.op("Max", [b4, kv4], name="mask.grid")], name="mask.grid_shape")
    idx = g.op("Concat", [g.op("Unsqueeze", [g.op("Expand", [b4, grid], name="mask.b_grid"),
                                             g.const("mask.last", np.array([-1], np.int64))], name="mask.b_idx"),
                          g.op("Unsqueeze", [g.op("Expand", [kv4, grid], name="mask.kv_grid"),
                                             g.const("mask.last2", np.array([-1], np.int64))], name="mask.kv_idx")],
               name="mask.index", axis=-1)
    pad = g.op("GatherND", [g.op("Cast", ["attention_mask"], name="mask.bool", to=TP.BOOL), idx], name="mask.padding")
    keep = g.op("And", [g.op("And", [g.const("mask.ones", np.array(True)), causal], name="mask.and0"), pad],
                name="mask.and1")
    bias = g.op("Where", [keep, g.const("mask.keep0", np.array(0.0, np.float32)),
                          g.const("mask.min", np.array(F32_MIN, np.float32))], name="mask.where")
    kt = g.op("Transpose", [k], name="attn.k_transpose", perm=[0, 1, 3, 2])
    scores = g.op("Mul", [g.op("MatMul", [q, kt], name="attn.qk"), g.const("attn.scale", np.array(Dh ** -0.5, np.float32))],
                  name="attn.mul")
    p = g.op("Softmax", [g.op("Add", [scores, bias], name="attn.add_mask")], name="attn.softmax", axis=-1)
    ctx = g.op("MatMul", [p, v], name="attn.pv")
    y = linear(g, merge_heads(g, ctx, H * Dh, "out"), H * Dh, D, "o")
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y.identity"))
    m = g.model("kv_llama_gqa", _kv_inputs(D, Hkv, Dh), _kv_outputs(D, Hkv, Dh))
    return m, _kv_data(11, B, D, Hkv, Dh)


def kv_llama_total():
    """kv_llama_gqa with the mask and present lengths declared as one unrelated name, "total"
    (the TorchScript exporter's dynamic_axes as bench/decode_bench.py writes them): the
    proofs relate it to past + seq through the present, which the model declares "total" too."""
    m, data = kv_llama_gqa()
    for v in list(m.graph.input) + list(m.graph.output):
        for d in v.type.tensor_type.shape.dim:
            if d.dim_param == _T:
                d.dim_param = "total"
    m.graph.name = "kv_llama_total"
    m.doc_string = "synthetic test model 'kv_llama_total' (fuseopt)"
    return m, data


def kv_mqa():
    B, D, H, Dh = 2, 16, 4, 4
    g = G(112)
    q = split_heads(g, linear(g, "x", D, H * Dh, "q"), H, Dh, "q")
    k = _cache(g, "past_key", split_heads(g, linear(g, "x", D, Dh, "k"), 1, Dh, "k"), "present_key")
    v = _cache(g, "past_value", split_heads(g, linear(g, "x", D, Dh, "v"), 1, Dh, "v"), "present_value")
    kt = g.op("Transpose", [k], name="attn.k_transpose", perm=[0, 1, 3, 2])  # [B, 1, Dh, S_kv]: broadcast over heads
    ctx = attention_core(g, q, kt, v, "attn", scale_div=float(np.sqrt(Dh)), bias=hf_additive_mask(g, "attention_mask"))
    y = linear(g, merge_heads(g, ctx, H * Dh, "out"), H * Dh, D, "o")
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y.identity"))
    m = g.model("kv_mqa", _kv_inputs(D, 1, Dh), _kv_outputs(D, 1, Dh))
    return m, _kv_data(12, B, D, 1, Dh)


MODELS = {
    f.__name__: f for f in (
        attn_sdpa_sqrt_scale, attn_masked_row, attn_gqa, attn_causal_trilu, attn_t5_bias, bert_block_fp16,
        external_data_mlp, if_outer_scope, kv_gpt2_mha, kv_llama_gqa, kv_llama_total, kv_mqa,
        neg_bias_non_last_axis, neg_nonconst_weight, neg_interior_used_twice, neg_cast_precision,
        neg_layernorm_axis)
}
EXTERNAL = {"external_data_mlp"}


# ---------------------------------------------------------------- writing

def run_reference(model_path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    so.intra_op_num_threads = 1  # same summation order every time
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return [o.name for o in sess.get_outputs()], sess.run(None, dict(zip(names, feeds)))


def write_tensor(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(array), name).SerializeToString())


def write_model(name, out_root):
    model, data_sets = MODELS[name]()
    onnx.checker.check_model(model, full_check=True)
    d = os.path.join(out_root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    if name in EXTERNAL:
        # Relative location next to the model; onnx appends to an existing side file,
        # and the folder was just emptied.
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx.data", size_threshold=1024)
    else:
        with open(path, "wb") as f:
            f.write(model.SerializeToString(deterministic=True))
    input_names = [i.name for i in model.graph.input]
    for k, feeds in enumerate(data_sets):
        td = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(td)
        out_names, outs = run_reference(path, feeds)
        for i, (n, a) in enumerate(zip(input_names, feeds)):
            write_tensor(os.path.join(td, f"input_{i}.pb"), a, n)
        for i, (n, a) in enumerate(zip(out_names, outs)):
            write_tensor(os.path.join(td, f"output_{i}.pb"), a, n)
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "synthetic"))
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"make_synthetic.py: unknown model(s) {unknown}; known: {list(MODELS)}")
    os.makedirs(args.out, exist_ok=True)
    for n in names:
        d = write_model(n, args.out)
        size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)
        print(f"{n:26s} {size / 1024:6.1f} KiB  {d}")


if __name__ == "__main__":
    main()
