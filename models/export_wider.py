#!/usr/bin/env python3
"""Session 29's generality sweep: tiny random-weight exports of architectures and forms no other
script in models/ covers (seq2seq siblings of BART, decoders with ALiBi / local attention /
CodeGen's interleaved QKV, spatial-reduction vision attention, audio encoders with relative
position biases), through both exporters, with ONNX Runtime reference outputs. Shares
export_real.py's export (inputs, dynamic axes, references, names); only the builders are here.

  python3 models/export_wider.py --out /tmp/wider [--only mpt,xglm] [--variants 17ts,18dynamo]
  python3 models/export_wider.py --forms --out /tmp/forms   # hand-written einsum attention,
      nn.Transformer / nn.TransformerEncoder through TorchScript (fast path off), timm EVA-02
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_real as er  # noqa: E402

WIDER_ARCHS = ["gptneo", "codegen", "mpt", "xglm", "biogpt", "ctrl", "mbart", "pegasus", "marian", "m2m100",
               "blenderbot", "funnel", "megatronbert", "rembert", "squeezebert", "segformer", "siglipvision",
               "pvt", "yolos", "wavlm", "hubert", "sew", "w2v2conformer", "ast",
               # vision / encoder-decoder tasks people export whole (session 29's third sweep)
               "samvision", "depthanything", "dpt", "whisperfull", "trocr", "owlvit", "mobilevit",
               # Swin with shifted windows active (16 × 16 patches, window 4): the [B', nW, H, S, S] mask view
               "swinshift", "swinv2"]


def build_wider(name, torch, tf):
    def Wrap(m):
        return er.first_output_wrap(torch, m)

    common = dict(attn_implementation=er.ATTN)
    g = torch.Generator().manual_seed(0)
    txt = er.text_inputs(torch, vocab=200)
    image = {"pixel_values": torch.randn(er.BATCH, 3, 32, 32, generator=g)}
    audio = {"input_values": torch.randn(er.BATCH, 400, generator=g)}
    s2s = dict(vocab_size=200, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
               decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
               pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=2, **common)
    bertish = dict(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                   max_position_embeddings=64, **common)
    w2v = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16),
               conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
               **common)
    if name == "gptneo":  # alternating global / local (window 8) causal attention
        cfg = tf.GPTNeoConfig(vocab_size=200, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                              attention_types=[[["global", "local"], 1]], window_size=8, max_position_embeddings=64,
                              **common)
        return Wrap(tf.GPTNeoModel(cfg)), txt, "text"
    if name == "codegen":  # QKV in 4 model-parallel groups, interleaved partial rotary
        cfg = tf.CodeGenConfig(vocab_size=200, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64,
                               n_inner=64, **common)
        return Wrap(tf.CodeGenModel(cfg)), txt, "text"
    if name == "mpt":  # ALiBi, no biases, no positions
        cfg = tf.MptConfig(vocab_size=200, d_model=32, n_heads=2, n_layers=2, expansion_ratio=2, max_seq_len=64)
        return Wrap(tf.MptModel(cfg)), txt, "text"
    if name == "xglm":  # sinusoidal positions, scaled embeddings
        cfg = tf.XGLMConfig(vocab_size=200, d_model=32, num_layers=2, attention_heads=2, ffn_dim=64,
                            max_position_embeddings=64, **common)
        return Wrap(tf.XGLMModel(cfg)), txt, "text"
    if name == "biogpt":
        return Wrap(tf.BioGptModel(tf.BioGptConfig(**bertish))), txt, "text"
    if name == "ctrl":
        cfg = tf.CTRLConfig(vocab_size=200, n_embd=32, n_layer=2, n_head=2, dff=64, n_positions=64, **common)
        return Wrap(tf.CTRLModel(cfg)), txt, "text"
    if name == "mbart":
        return er.bart_wrap(torch, tf.MBartModel(tf.MBartConfig(**s2s))), txt, "text"
    if name == "pegasus":
        return er.bart_wrap(torch, tf.PegasusModel(tf.PegasusConfig(**s2s))), txt, "text"
    if name == "marian":
        return er.bart_wrap(torch, tf.MarianModel(tf.MarianConfig(**s2s))), txt, "text"
    if name == "m2m100":
        return er.bart_wrap(torch, tf.M2M100Model(tf.M2M100Config(**s2s))), txt, "text"
    if name == "blenderbot":
        return er.bart_wrap(torch, tf.BlenderbotModel(tf.BlenderbotConfig(**s2s))), txt, "text"
    if name == "funnel":  # pooled queries in the second block, relative attention
        cfg = tf.FunnelConfig(vocab_size=200, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=64,
                              num_decoder_layers=1, **common)
        return Wrap(tf.FunnelModel(cfg)), txt, "text"
    if name == "megatronbert":  # pre-norm BERT
        return Wrap(tf.MegatronBertModel(tf.MegatronBertConfig(**bertish), add_pooling_layer=False)), txt, "text"
    if name == "rembert":
        cfg = tf.RemBertConfig(input_embedding_size=16, output_embedding_size=16, **bertish)
        return Wrap(tf.RemBertModel(cfg, add_pooling_layer=False)), txt, "text"
    if name == "squeezebert":  # 1x1 grouped convolutions instead of Linear
        b = {k: v for k, v in bertish.items() if k != "attn_implementation"}
        return Wrap(tf.SqueezeBertModel(tf.SqueezeBertConfig(embedding_size=32, **b))), txt, "text"
    if name == "segformer":  # keys/values from a strided-conv reduced sequence
        cfg = tf.SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                                 hidden_sizes=[16, 32], num_attention_heads=[1, 2], patch_sizes=[3, 3], strides=[2, 2],
                                 mlp_ratios=[2, 2], decoder_hidden_size=32)
        return Wrap(tf.SegformerModel(cfg)), image, "image"
    if name == "siglipvision":
        cfg = tf.SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                    image_size=32, patch_size=8, **common)
        return Wrap(tf.SiglipVisionModel(cfg)), image, "image"
    if name == "pvt":
        cfg = tf.PvtConfig(image_size=32, num_channels=3, num_encoder_blocks=2, depths=[1, 1], sequence_reduction_ratios=[2, 1],
                           hidden_sizes=[16, 32], patch_sizes=[4, 2], strides=[4, 2], num_attention_heads=[1, 2],
                           mlp_ratios=[2, 2])
        return Wrap(tf.PvtModel(cfg)), image, "image"
    if name == "yolos":  # ViT with detection tokens
        cfg = tf.YolosConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                             image_size=[32, 32], patch_size=8, num_detection_tokens=4, **common)
        return Wrap(tf.YolosModel(cfg, add_pooling_layer=False)), image, "image"
    if name == "wavlm":  # gated relative position bias
        return Wrap(tf.WavLMModel(tf.WavLMConfig(num_buckets=16, max_bucket_distance=32, **w2v))), audio, "audio"
    if name == "hubert":
        return Wrap(tf.HubertModel(tf.HubertConfig(**w2v))), audio, "audio"
    if name == "sew":  # attention on a squeezed (pooled) sequence
        return Wrap(tf.SEWModel(tf.SEWConfig(squeeze_factor=2, **w2v))), audio, "audio"
    if name == "w2v2conformer":  # rotary position embeddings in a conformer block
        cfg = tf.Wav2Vec2ConformerConfig(position_embeddings_type="rotary", conv_depthwise_kernel_size=3, **w2v)
        return Wrap(tf.Wav2Vec2ConformerModel(cfg)), audio, "audio"
    if name == "ast":
        cfg = tf.ASTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           patch_size=8, frequency_stride=8, time_stride=8, max_length=32, num_mel_bins=16, **common)
        return Wrap(tf.ASTModel(cfg)), {"input_values": torch.randn(er.BATCH, 32, 16, generator=g)}, "audio"
    if name == "samvision":  # segment-anything's image encoder: windowed + global attention, rel-pos terms
        cfg = tf.SamVisionConfig(hidden_size=32, output_channels=16, num_hidden_layers=2, num_attention_heads=2,
                                 image_size=64, patch_size=16, mlp_dim=64, window_size=2, global_attn_indexes=[1],
                                 use_rel_pos=True)
        return Wrap(tf.SamVisionModel(cfg)), {"pixel_values": torch.randn(er.BATCH, 3, 64, 64, generator=g)}, "image"
    if name == "depthanything":  # DINOv2 backbone + DPT head
        bb = tf.Dinov2Config(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, mlp_ratio=2, image_size=28,
                             patch_size=14, out_features=["stage1", "stage2", "stage3", "stage4"],
                             reshape_hidden_states=False)
        cfg = tf.DepthAnythingConfig(backbone_config=bb, neck_hidden_sizes=[8, 16, 32, 32], reassemble_hidden_size=32,
                                     fusion_hidden_size=16, head_hidden_size=8, patch_size=14)
        return Wrap(tf.DepthAnythingForDepthEstimation(cfg)), \
            {"pixel_values": torch.randn(er.BATCH, 3, 28, 28, generator=g)}, "image"
    if name == "dpt":
        cfg = tf.DPTConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64,
                           image_size=32, patch_size=8, backbone_out_indices=[0, 1, 2, 3],
                           neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16, reassemble_factors=[4, 2, 1, 0.5])
        return Wrap(tf.DPTForDepthEstimation(cfg)), image, "image"
    if name == "owlvit":
        cfg = tf.OwlViTVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                    image_size=32, patch_size=8)
        return Wrap(tf.OwlViTVisionModel(cfg)), image, "image"
    if name == "mobilevit":
        cfg = tf.MobileViTConfig(image_size=64, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
                                 num_attention_heads=2)
        return Wrap(tf.MobileViTModel(cfg)), {"pixel_values": torch.randn(er.BATCH, 3, 64, 64, generator=g)}, "image"
    if name in ("swinshift", "swinv2"):  # SwinV2 adds cosine attention with a per-head logit scale
        kw = dict(image_size=32, patch_size=4, embed_dim=16, depths=[2, 1], num_heads=[2, 4], window_size=4)
        model = tf.SwinModel(tf.SwinConfig(**kw)) if name == "swinshift" else tf.Swinv2Model(tf.Swinv2Config(**kw))
        return Wrap(model), image, "image"
    if name in ("whisperfull", "trocr"):  # encoder + decoder in one graph, decoder ids as a second input
        if name == "whisperfull":
            cfg = tf.WhisperConfig(vocab_size=200, d_model=32, encoder_layers=1, encoder_attention_heads=2,
                                   encoder_ffn_dim=64, decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=64,
                                   num_mel_bins=16, max_source_positions=16, max_target_positions=16, pad_token_id=0,
                                   bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, **common)
            model, key, src = tf.WhisperModel(cfg), "input_features", torch.randn(er.BATCH, 16, 32, generator=g)
        else:
            enc = tf.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                               image_size=32, patch_size=8)
            dec = tf.TrOCRConfig(vocab_size=200, d_model=32, decoder_layers=1, decoder_attention_heads=2,
                                 decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
                                 eos_token_id=2)
            model = tf.VisionEncoderDecoderModel(tf.VisionEncoderDecoderConfig.from_encoder_decoder_configs(enc, dec))
            key, src = "pixel_values", image["pixel_values"]

        class EncDec(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, **kw):
                return self.m(**kw)[0]

        return EncDec(), {key: src, "decoder_input_ids": torch.randint(1, 200, (er.BATCH, 5), generator=g)}, "image"
    raise KeyError(name)


# ---- non-transformers forms: hand-written einsum attention, PyTorch's nn.Transformer through
# TorchScript with the MHA fast path off, timm's EVA-02 (class token kept out of the rotary) ----

def save_form(name, model, inputs, names, dyn_ts, dyn_dynamo, out_root, torch):
    """Exports `model` through TorchScript (opset 17) and dynamo (opset 18) into out_root with
    ONNX Runtime reference outputs; prints one line per export."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    model.eval()
    for ex, opset in (("ts", 17), ("dynamo", 18)):
        d = os.path.join(out_root, f"{name}_op{opset}_{ex}")
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        path = os.path.join(d, "model.onnx")
        try:
            with torch.no_grad():
                if ex == "ts":
                    torch.onnx.export(model, tuple(inputs), path, input_names=names, output_names=["out"],
                                      opset_version=opset, dynamic_axes=dyn_ts, dynamo=False)
                else:
                    prog = torch.onnx.export(model, tuple(inputs), input_names=names, output_names=["out"],
                                             opset_version=opset, dynamic_shapes=dyn_dynamo, dynamo=True,
                                             external_data=False)
                    prog.save(path)
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            outs = sess.run(None, {i.name: x.numpy() for i, x in zip(sess.get_inputs(), inputs)})
            m = onnx.load(path)
            for i, x in enumerate(inputs):
                onnx.save_tensor(numpy_helper.from_array(x.numpy(), m.graph.input[i].name),
                                 os.path.join(d, "test_data_set_0", f"input_{i}.pb"))
            for i, o in enumerate(outs):
                onnx.save_tensor(numpy_helper.from_array(o, m.graph.output[i].name),
                                 os.path.join(d, "test_data_set_0", f"output_{i}.pb"))
            with torch.no_grad():
                ref = model(*inputs)
            print(f"exported {os.path.basename(d)}: ORT vs PyTorch max abs {float(np.abs(ref.numpy() - outs[0]).max()):.2e}",
                  flush=True)
        except Exception as e:  # noqa: BLE001  (one exporter failing must not stop the rest)
            print(f"FAILED {name} {ex}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}", flush=True)


def export_forms(out_root, torch):
    B, S, E = er.BATCH, er.SEQ, 32
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, S, E, generator=g)
    kpm = torch.zeros(B, S, dtype=torch.bool)
    kpm[1, -er.PAD:] = True
    batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=64)

    class EinsumAttention(torch.nn.Module):  # the einops / lucidrains spelling
        def __init__(self, dim=32, heads=4):
            super().__init__()
            self.h, self.scale = heads, (dim // heads) ** -0.5
            self.qkv = torch.nn.Linear(dim, dim * 3, bias=False)
            self.o = torch.nn.Linear(dim, dim)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = (t.reshape(b, n, self.h, -1).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
            attn = (torch.einsum("bhid,bhjd->bhij", q, k) * self.scale).softmax(dim=-1)
            return self.o(torch.einsum("bhij,bhjd->bhid", attn, v).transpose(1, 2).reshape(b, n, -1))

    axes = {0: "batch", 1: "seq"}
    save_form("hand_einsum_attn", EinsumAttention(), [x], ["x"], {"x": axes, "out": axes}, ({0: batch, 1: seq},),
              out_root, torch)
    torch.backends.mha.set_fastpath_enabled(False)  # TorchScript cannot export the fused fast path
    core = torch.nn.Transformer(d_model=E, nhead=4, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=64,
                                batch_first=True, dropout=0.0)

    class Seq2Seq(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.t = core

        def forward(self, src, tgt):
            causal = torch.nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
            return self.t(src, tgt, tgt_mask=causal, tgt_is_causal=True)

    tgt = torch.randn(B, 8, E, generator=g)
    tseq = torch.export.Dim("tseq", min=2, max=64)
    save_form("torch_transformer", Seq2Seq(), [x, tgt], ["src", "tgt"],
              {"src": axes, "tgt": {0: "batch", 1: "tseq"}, "out": {0: "batch", 1: "tseq"}},
              ({0: batch, 1: seq}, {0: batch, 1: tseq}), out_root, torch)
    layer = torch.nn.TransformerEncoderLayer(E, 4, 64, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.e = encoder

        def forward(self, x, kpm):
            return self.e(x, src_key_padding_mask=kpm)

    save_form("torch_encoder_nofast", Encoder(), [x, kpm], ["x", "kpm"], {"x": axes, "kpm": axes, "out": axes},
              ({0: batch, 1: seq}, {0: batch, 1: seq}), out_root, torch)
    try:
        import timm
    except ImportError:
        print("timm not installed: EVA-02 skipped", flush=True)
        return
    eva = timm.create_model("eva02_tiny_patch14_224", pretrained=False, num_classes=10, img_size=28, patch_size=14,
                            depth=2, embed_dim=64, num_heads=2)
    image = torch.randn(B, 3, 28, 28, generator=g)
    save_form("timm_eva02", eva, [image], ["img"], {"img": {0: "batch"}, "out": {0: "batch"}}, ({0: batch},),
              out_root, torch)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/tmp/wider")
    ap.add_argument("--only", default="")
    ap.add_argument("--variants", default="17ts,18dynamo")
    ap.add_argument("--attn", default="eager")
    ap.add_argument("--forms", action="store_true", help="export the non-transformers forms instead")
    a = ap.parse_args()
    er.ATTN, er.DTYPE = a.attn, "fp32"
    import torch
    if a.forms:
        export_forms(a.out, torch)
        return 0
    import transformers as tf
    er.build = build_wider  # export_one builds through this module's global
    archs = a.only.split(",") if a.only else WIDER_ARCHS
    jobs = [(arch, op, ex) for arch in archs for op, ex in er.parse_variants(a.variants, er.VARIANTS)]
    failures = er.run_exports(jobs, lambda arch, op, ex: er.export_one(arch, op, ex, a.out, torch, tf), torch)
    return 1 if failures == len(jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
