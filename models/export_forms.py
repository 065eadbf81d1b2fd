#!/usr/bin/env python3
"""Export attention *forms* that are not Hugging Face text models: PyTorch's own
modules (nn.MultiheadAttention, nn.TransformerEncoder/Decoder, F.scaled_dot_product_attention
with GQA), torchvision and timm vision transformers, and static-shape (no dynamic
dims) dynamo exports of HF decoders. Tiny random configs, both exporters, ONNX
Runtime reference outputs in the ONNX backend-test layout (model.onnx +
test_data_set_0/{input,output}_N.pb).

Runs where torch, torchvision, timm, transformers and onnxruntime are installed (the
GPU machine; no network: every config is built in code).

  python3 models/export_forms.py --out models/exported [--only torch_mha,tv_vit] [--list]

Each model is <form>_op<opset>_<ts|dynamo>[_static]. A form that an exporter cannot
export is reported (FAILED ...) and the rest go on.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_real import run_exports, save_pb  # noqa: E402  (one writer of the .pb layout)

E, H, FF = 32, 4, 64          # embedding, heads, feed-forward width
BATCH, SEQ, PAD = 2, 16, 5    # row 1's last PAD positions are padding
IMG = 32                      # vision models: 2x3x32x32


def padding_mask(torch, as_bool=True):
    """key_padding_mask in PyTorch's sense: True = ignore this key."""
    m = torch.zeros(BATCH, SEQ, dtype=torch.bool)
    m[1, SEQ - PAD:] = True
    return m if as_bool else m.to(torch.int64)


def tokens(torch, seq_first=False):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, SEQ, E, generator=g)
    return x.transpose(0, 1).contiguous() if seq_first else x


def image(torch):
    return torch.randn(BATCH, 3, IMG, IMG, generator=torch.Generator().manual_seed(0))


def build(form, torch):
    """Returns (module, ordered inputs dict, dims: {input name: {axis: dim name}})."""
    nn, F = torch.nn, torch.nn.functional
    text = lambda names, seq_axis=1: {n: {0 if seq_axis == 1 else 1: "batch", seq_axis: "seq"} for n in names}

    if form in ("torch_mha", "torch_mha_seqfirst"):
        seq_first = form.endswith("seqfirst")

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.mha = nn.MultiheadAttention(E, H, batch_first=not seq_first)

            def forward(self, x, key_padding_mask):
                # need_weights=False is what transformer code uses; the seq-first variant
                # keeps the default (averaged weights computed, not returned here).
                return self.mha(x, x, x, key_padding_mask=key_padding_mask, need_weights=seq_first)[0]

        dims = {"x": {0: "seq", 1: "batch"} if seq_first else {0: "batch", 1: "seq"},
                "key_padding_mask": {0: "batch", 1: "seq"}}
        return M(), {"x": tokens(torch, seq_first), "key_padding_mask": padding_mask(torch)}, dims
    if form in ("torch_encoder", "torch_encoder_prenorm"):
        pre = form.endswith("prenorm")
        layer = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, batch_first=True, norm_first=pre,
                                           activation="gelu" if pre else "relu")

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

            def forward(self, x, src_key_padding_mask):
                return self.enc(x, src_key_padding_mask=src_key_padding_mask)

        return M(), {"x": tokens(torch), "src_key_padding_mask": padding_mask(torch)}, text(["x", "src_key_padding_mask"])
    if form == "torch_decoder":
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.dec = nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, batch_first=True)

            def forward(self, tgt, memory):
                causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], dtype=tgt.dtype)
                return self.dec(tgt, memory, tgt_mask=causal, tgt_is_causal=True)

        mem = torch.randn(BATCH, SEQ // 2, E, generator=torch.Generator().manual_seed(1))
        return M(), {"tgt": tokens(torch), "memory": mem}, {"tgt": {0: "batch", 1: "seq"},
                                                            "memory": {0: "batch", 1: "mem_seq"}}
    if form in ("torch_sdpa_gqa", "torch_sdpa_boolmask"):
        gqa = form.endswith("gqa")

        class M(nn.Module):
            """A hand-written block as people write it: projections, view/transpose, SDPA."""

            def __init__(self):
                super().__init__()
                self.kvh = 2 if gqa else H
                self.q = nn.Linear(E, E)
                self.kv = nn.Linear(E, 2 * self.kvh * (E // H))
                self.o = nn.Linear(E, E)

            def forward(self, x, mask):
                b, s, _ = x.shape
                d = E // H
                q = self.q(x).view(b, s, H, d).transpose(1, 2)
                k, v = self.kv(x).view(b, s, 2, self.kvh, d).permute(2, 0, 3, 1, 4).unbind(0)
                if gqa:
                    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                else:  # boolean mask: True = attend, broadcast over heads and queries
                    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
                return self.o(y.transpose(1, 2).reshape(b, s, E))

        keep = ~padding_mask(torch)
        return M(), {"x": tokens(torch), "mask": keep}, text(["x", "mask"])
    if form == "tv_vit":
        from torchvision.models.vision_transformer import VisionTransformer
        m = VisionTransformer(image_size=IMG, patch_size=8, num_layers=2, num_heads=2, hidden_dim=E, mlp_dim=FF,
                              num_classes=10)
        return m, {"pixel_values": image(torch)}, {"pixel_values": {0: "batch"}}
    if form == "tv_swin":
        from torchvision.models.swin_transformer import SwinTransformer
        m = SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2], window_size=[4, 4],
                            num_classes=10)
        return m, {"pixel_values": image(torch)}, {"pixel_values": {0: "batch"}}
    if form in ("timm_vit", "timm_eva", "timm_xcit"):
        import timm
        kw = dict(img_size=IMG, patch_size=8, embed_dim=E, depth=2, num_heads=2, num_classes=10)
        if form == "timm_vit":
            from timm.models.vision_transformer import VisionTransformer
            m = VisionTransformer(**kw)
        elif form == "timm_eva":  # rotary position embedding in a vision transformer
            from timm.models.eva import Eva
            m = Eva(use_rot_pos_emb=True, **kw)
        else:  # cross-covariance attention: NOT standard attention, must stay unfused
            from timm.models.xcit import Xcit
            m = Xcit(cls_attn_layers=1, **kw)
        return m, {"pixel_values": image(torch)}, {"pixel_values": {0: "batch"}}
    raise ValueError(f"unknown form {form}")


# HF decoders exported with literal dims (dynamo exporter, no dynamic_shapes): the form
# issue 11 found unfused. Built by export_real.py's builder.
STATIC_HF = ["qwen2", "phi3", "gemma"]
FORMS = ["torch_mha", "torch_mha_seqfirst", "torch_encoder", "torch_encoder_prenorm", "torch_decoder",
         "torch_sdpa_gqa", "torch_sdpa_boolmask", "tv_vit", "tv_swin", "timm_vit", "timm_eva", "timm_xcit"]
VARIANTS = [(17, "ts"), (18, "dynamo")]


def export_one(form, opset, exporter, out_root, torch, static=False):
    import onnx
    import onnxruntime as ort
    if static:
        import transformers as tf
        import export_real
        model, inputs, _ = export_real.build(form, torch, tf)
        dims = {}
    else:
        model, inputs, dims = build(form, torch)
    model.eval()
    name = f"{form}_op{opset}_{exporter}" + ("_static" if static else "")
    d = os.path.join(out_root, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    names = list(inputs.keys())
    args = tuple(inputs[k] for k in names)

    class Positional(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *a):
            # vision models take the image positionally; the others by name
            return self.m(*a) if dims.get(names[0]) == {0: "batch"} and len(a) == 1 else self.m(**dict(zip(names, a)))

    pm = Positional(model)
    if exporter == "ts" and hasattr(torch.backends, "mha"):
        # the modules' eval fast path (aten::_native_multi_head_attention) has no TorchScript
        # symbolic; users exporting with dynamo=False switch it off, so do we
        torch.backends.mha.set_fastpath_enabled(False)
    elif hasattr(torch.backends, "mha"):
        torch.backends.mha.set_fastpath_enabled(True)  # the default, as dynamo users get it
    with torch.no_grad():
        if exporter == "ts":
            dyn = {k: v for k, v in dims.items()} or None
            if dyn:  # the output's leading dims are the first input's (vision: batch only)
                dyn["out"] = dict(dims[names[0]])
            torch.onnx.export(pm, args, path, input_names=names, output_names=["out"], opset_version=opset,
                              dynamic_axes=dyn, dynamo=False)
        else:
            ds = None
            if dims:
                made = {}
                dim = lambda n: made.setdefault(n, torch.export.Dim(n, min=2, max=64))
                ds = (tuple({ax: dim(n) for ax, n in dims[k].items()} for k in names),)
            prog = torch.onnx.export(pm, args, dynamic_shapes=ds, input_names=names, output_names=["out"],
                                     opset_version=opset, dynamo=True, external_data=False)
            prog.save(path)
    m = onnx.load(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {i.name: x.numpy() for i, x in zip(sess.get_inputs(), args)}
    outs = sess.run(None, feeds)
    for i, x in enumerate(args):
        save_pb(x.numpy(), os.path.join(d, "test_data_set_0", f"input_{i}.pb"), m.graph.input[i].name)
    for i, o in enumerate(outs):
        save_pb(o, os.path.join(d, "test_data_set_0", f"output_{i}.pb"), m.graph.output[i].name)
    with torch.no_grad():
        ref = pm(*args)
    ref = ref[0] if isinstance(ref, (tuple, list)) else ref
    err = float(np.abs(ref.numpy() - outs[0]).max())
    return name, len(m.graph.node), err


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models/exported")
    ap.add_argument("--only", default="", help="comma-separated forms (default: all, plus the static HF decoders)")
    ap.add_argument("--variants", default="", help="comma-separated like 17ts,18dynamo (default: both)")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(FORMS + [f"{s} (static)" for s in STATIC_HF]))
        return 0
    import torch
    jobs = []
    want = set(a.variants.split(",")) if a.variants else None
    only = set(a.only.split(",")) if a.only else None
    for form in FORMS:
        if only is None or form in only:
            jobs += [(form, op, ex, False) for op, ex in VARIANTS if want is None or f"{op}{ex}" in want]
    for form in STATIC_HF:
        if only is None or form in only:
            jobs.append((form, 18, "dynamo", True))
    failures = run_exports(jobs, lambda f, op, ex, st: export_one(f, op, ex, a.out, torch, st), torch)
    return 1 if failures == len(jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
