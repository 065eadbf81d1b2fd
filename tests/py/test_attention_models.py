"""The attention-family fusions (QkvPack, Attention, LayerNormLinear) end to end: every
transformer in models/real and models/exported through the full default pipeline.

Per model:
  - acceptance: one fuseopt.Attention per layer (layers = the original's Softmax nodes), at most 4 GEMM nodes per layer
    (fused QKV, output projection, two FFN GEMMs; DeBERTa v1 and MobileBERT have more by
    design, listed; a task head's GEMMs counted apart, EXTRA_GEMMS), no Softmax / ReduceMean /
    standalone LayerNorm primitive left (a Pow only in an L2 normalisation, CLIP's embeddings),
    no GELU or Tanh left after a GEMM (one after a Conv stem or a norm has no GEMM to fold into);
  - the optimized model passes onnx.checker (full_check), ONNX Runtime reproduces
    test_data_set_0 through the function bodies, and `fuserun --backend cpu --check`
    through fuseopt's own kernels (fp32, 1e-4 norm-wise);
  - idempotence: fuseopt on its own output changes no op count.
Prints one line per model with the fused-op counts (the report's per-model figures)."""
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

RTOL = ATOL = 1e-4
GEMMS = {"MatMul", "Gemm", "FusedMatMul", "LayerNormLinear", "GatedMatMul"}
# GEMMs that are not part of any layer: the embedding projections of ALBERT and ELECTRA,
# Swin's patch-merging reduction.
EXTRA_GEMMS = {"albert": 1, "electra": 1, "swin": 1, "wav2vec2": 1, "tv_vit": 1, "timm_vit": 1}  # tv/timm: the classifier head
# The task heads of models/export_heads.py (tests/py/test_head_models.py checks them against
# their bare models): MLM transform + tied decoder, pooler (or RoBERTa's dense) + classifier,
# one Linear (token classification, QA, lm_head, image classifier), CLIP's two projections.
EXTRA_GEMMS.update({"_mlm_": 2, "_seqcls_": 2, "_tokcls_": 1, "_qa_": 1, "_lm_": 1, "_imgcls_": 1, "clip_": 2})
# Optimum's exports (models/export_optimum.py) carry the task's head: the lm_head of the causal
# LMs and seq2seq decoders, the classifier of image classification (the MLM head matches above).
EXTRA_GEMMS.update({"optimum_": 1})
# Session 29's wider sweep (models/export_wider.py), weight GEMMs outside the 4-per-layer count
# by design: Funnel's relative-position projection (an Einsum with a weight, now a MatMul),
# SegFormer's decode-free encoder stage projections, WavLM's feature projection and its
# per-layer gated relative-position Linear.
EXTRA_GEMMS.update({"funnel_": 1, "segformer_": 1, "wavlm_": 3, "timm_eva02": 1})  # EVA-02: the classifier head
# Session 30's sweep (models/export_sweep30.py): Hubert's feature projection; PVT-v2's first
# stage (spatial reduction: Q from the full sequence, K/V from the reduced one, so Q is its own
# GEMM); Pix2Struct's patch projection (a Linear on flattened patches); Perceiver's cross-attention
# (Q from the latents, K/V from the inputs); DETR's positions added to the Q and K inputs but not
# V's (encoder: QK packed + V; decoder cross-attention: Q, K, V three GEMMs).
# Conditional DETR's decoder projects content and spatial queries / keys apart (q/k content, q/k pos,
# the cross-attention's sine query projection; listed before "detr_", which its name contains);
# LFM2's short-convolution layer (in / out projections and its MLP) has no attention block to count.
EXTRA_GEMMS.update({"conditionaldetr_": 5, "lfm2_": 4})
# SAM2's Hiera: the stage-changing block projects its residual to the wider dim.
EXTRA_GEMMS.update({"sam2vision_": 1})
EXTRA_GEMMS.update({"hubert_": 1, "pvtv2_": 1, "pix2struct_": 1, "perceiver_": 1, "detr_": 2})
# Architectures whose layers have more weight GEMMs by design: DeBERTa (v1) projects the
# relative-position embeddings per layer; MobileBERT adds bottleneck projections and stacked FFNs.
# DeepSeek-V3's multi-head latent attention has low-rank projections (q_a, q_b, kv_a, kv_b, o);
# ConvBERT's span-based convolution beside the attention adds its kernel and output Linears;
# Qwen2-MoE's TorchScript export keeps the router and the shared expert's sigmoid gate as MatMuls.
GEMMS_PER_LAYER = {"deberta_": 5, "mobilebert": 9, "deepseekv3_": 7, "convbert_": 5, "qwen2moe_": 6}
# Attention the catalogue op cannot express; the fusion must reject it with its reason
# (tests/py/test_attention_mqa_models.py checks the reason). Fails on an unexpected fusion.
# (Gemma-2's logit soft-capping fuses since the softcap attribute. TorchScript exports of
# nn.MultiheadAttention, whose k.view(16, B*H, D) accepts only the traced length, fuse since
# session 29: the pass manager binds that length, src/pass/forced_dims.h. GPT-OSS's attention
# sinks fuse since session 31: fuseopt.Attention's sinks input, passes/fusion/attention/sinks.h.)
KNOWN_UNFUSED_ATTENTION = {
    # Hiera's mask-unit attention is rank 5: q, k, v [B, H, nW, S_w, D] with the windows as a second
    # batch axis and the token order (s, w) of a strided view; see NOTES-attention.md, session 30.
    "hiera_": "rank-5 mask-unit attention [B, H, windows, S, D]",
    # XLNet: seq-first einsum attention whose output projection Einsum('ibnd,hnd->ibh') contracts two
    # letters, so no Reshape merges the heads (the root the fusion needs).
    "xlnet_": "no head-merge Reshape: the output projection is Einsum('ibnd,hnd->ibh')",
}
# Models with some blocks the op cannot express beside fused ones: how many stay unfused and why
# (printed as KNOWN; the test fails when more or fewer stay).
KNOWN_UNFUSED_BLOCKS = {
    # Florence-2's DaViT alternates window attention (fused) with channel attention:
    # softmax(qᵀ·k) over the C/G channels of a group, its "head dim" the token count N.
    "florence2vision_": (2, "DaViT channel attention: softmax(q^T k) over channels, head dim = token count"),
    # PEGASUS-X's encoder: local tokens score [global keys, their block's keys] as two products
    # concatenated before the softmax, P split back for two P·V products (its global-token
    # attention and the decoder fuse).
    "pegasusx_": (2, "block-local + global attention: two score products concatenated, P split"),
}
# Known limits, kept visible (printed as KNOWN, not hidden); the test fails on an
# unexpected pass, so an entry must go once the limit is lifted. (Gemma's gated MLP,
# 5 GEMMs per layer before, is now fuseopt.GatedMatMul.)
KNOWN_GEMM_EXCESS = {}
# MLP activations outside FusedMatMul's catalogue, left as primitives after the GEMM (printed as
# KNOWN; the test fails once they fuse, so the entry must go then). Empty since session 21, when
# Nemotron's and Persimmon's squared ReLU (Relu -> Pow 2) became the `relu2` activation.
KNOWN_UNFUSED_ACTIVATION = {}


def is_layer_gemm(n, inits):
    if n.op_type not in GEMMS:
        return False
    if n.op_type == "MatMul":  # a weight GEMM, not the rotary-frequency or attention MatMuls
        w = inits.get(n.input[1])
        return w is not None and len(w.dims) == 2
    return True


def attention_blocks(orig):
    """Attention blocks of an export: its Softmax nodes, or from opset 23 the standard
    Attention nodes the dynamo exporter writes for scaled_dot_product_attention. A Softmax of a
    weight projection (a MoE router, ConvBERT's dynamic-convolution kernel) is not one."""
    return sum(1 for n in lib.all_nodes(orig.graph)
               if n.op_type == "Softmax" or (n.op_type == "Attention" and n.domain in ("", "ai.onnx"))) \
        - len(lib.weight_gemm_softmaxes(orig.graph))


def structural(name, orig, model):
    fails = []
    layers = attention_blocks(orig)
    nodes = lib.all_nodes(model.graph)
    ops = Counter(n.op_type for n in nodes)
    inits = {t.name: t for t in model.graph.initializer}
    prod = {o: n for n in model.graph.node for o in n.output}
    unfusable = next((why for k, why in KNOWN_UNFUSED_ATTENTION.items() if k in name), None)
    if unfusable:
        if ops["Attention"]:
            fails.append(f"{name}: Attention fused although {unfusable} was expected to block it")
        else:
            print(f"KNOWN {name}: attention not fused ({unfusable})")
    elif (kb := next((v for k, v in KNOWN_UNFUSED_BLOCKS.items() if k in name), None)):
        if ops["Attention"] != layers - kb[0]:
            fails.append(f"{name}: {ops['Attention']} Attention nodes for {layers} blocks, {kb[0]} of them known "
                         f"unfusable ({kb[1]}): update KNOWN_UNFUSED_BLOCKS")
        else:
            print(f"KNOWN {name}: {kb[0]} of {layers} attention blocks not fused ({kb[1]})")
    elif ops["Attention"] != layers:
        fails.append(f"{name}: {ops['Attention']} Attention nodes for {layers} layers")
    gemms = sum(1 for n in nodes if is_layer_gemm(n, inits))
    extra = next((v for k, v in EXTRA_GEMMS.items() if k in name), 0)
    known = next((v for k, v in KNOWN_GEMM_EXCESS.items() if k in name), 0)
    per_layer = next((v for k, v in GEMMS_PER_LAYER.items() if k in name), 4)
    if gemms > per_layer * layers + extra + known * layers:
        fails.append(f"{name}: {gemms} GEMM nodes for {layers} layers (at most {per_layer} per layer)")
    elif known and gemms > 4 * layers + extra:
        print(f"KNOWN {name}: {gemms} GEMM nodes for {layers} layers (gated MLP: gate/up not packable)")
    elif known:
        fails.append(f"{name}: known limit no longer holds ({gemms} GEMMs): remove it from KNOWN_GEMM_EXCESS")
    other_softmax = len(lib.weight_gemm_softmaxes(orig.graph))  # routers stay Softmax
    other_softmax += next((v[0] for k, v in KNOWN_UNFUSED_BLOCKS.items() if k in name), 0)
    if ops["Softmax"] > other_softmax and not unfusable:
        fails.append(f"{name}: {ops['Softmax'] - other_softmax} Softmax left")
    # A ReduceMean over the last axis is a norm left in primitives; over the tokens (timm's
    # global average pooling, EVA-02's default head) it is the model's pooling.
    norm_means = [n for n in nodes if n.op_type == "ReduceMean" and lib.reduces_last_axis(n, inits, model)]
    if norm_means:
        fails.append(f"{name}: {len(norm_means)} ReduceMean left over the last axis ('{norm_means[0].name}')")
    pows = lib.pows_outside_l2_norm(model.graph)  # CLIP's sum(x**2)**0.5 normalisation stays, cheap
    known_act = next((why for k, why in KNOWN_UNFUSED_ACTIVATION.items() if k in name), None)
    if pows and known_act:
        print(f"KNOWN {name}: {len(pows)} Pow left: {known_act}")
    elif pows:
        fails.append(f"{name}: {len(pows)} Pow left ({pows[0]})")
    elif known_act:
        fails.append(f"{name}: known limit no longer holds (no Pow left): remove it from KNOWN_UNFUSED_ACTIVATION")
    for op, node_name in lib.leftover_activations(model.graph):
        fails.append(f"{name}: {op} '{node_name}' left inside a layer (GELU not folded into its GEMM)")
    # Norms left as LayerNormalization / fuseopt.LayerNorm are fused norms (no primitives): a final
    # norm, or one whose output is rearranged before its GEMMs (Swin's window partition).
    return fails, layers, gemms


def check_one(args, model_dir, tmp):
    import onnx
    name = os.path.basename(model_dir)
    src = os.path.join(model_dir, "model.onnx")
    out = os.path.join(tmp, name + ".onnx")
    r = lib.run_fuseopt(args.bin, src, out, "-q")
    if r.returncode != 0:
        return [f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()}"]
    model = onnx.load(out)
    orig = onnx.load(src, load_external_data=False)
    if not attention_blocks(orig):
        return []  # not a transformer (resnet_tiny)
    failures, layers, gemms = structural(name, orig, model)
    if not any(o.domain == "fuseopt" and o.version == 1 for o in model.opset_import):
        failures.append(f"{name}: no opset import for domain fuseopt version 1")
    try:
        onnx.checker.check_model(out, full_check=True)
    except Exception as e:  # noqa: BLE001
        failures.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
    failures += lib.ort_failures(name, out, model_dir, ATOL, RTOL)
    half = any(t.data_type in (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16) for t in model.graph.initializer)
    # (fp16/bf16 models: the CPU backend computes fp32 only; ONNX Runtime checked them above.)
    if not half:
        failures += lib.fuserun_cpu_failures(args.bin, name, out, model_dir)
    out2 = os.path.join(tmp, name + ".again.onnx")
    r2 = lib.run_fuseopt(args.bin, out, out2, "-q")
    if r2.returncode != 0:
        failures.append(f"{name}: fuseopt on its own output: exit {r2.returncode}: {r2.stderr.strip()}")
    else:
        c1 = Counter(n.op_type for n in model.graph.node)
        c2 = Counter(n.op_type for n in onnx.load(out2).graph.node)
        if c1 != c2:
            failures.append(f"{name}: not idempotent: {dict(c1 - c2)} -> {dict(c2 - c1)}")
    fused = Counter(n.op_type for n in model.graph.node if n.domain == "fuseopt")
    status = "ok" if not failures else "FAIL"
    print(f"{status} {name}: layers={layers} gemms={gemms} ({gemms / max(layers, 1):.1f}/layer) {dict(sorted(fused.items()))}")
    return failures


def main():
    return lib.run_over_models(check_one, "onnx", "onnxruntime", "numpy")


if __name__ == "__main__":
    sys.exit(main())
