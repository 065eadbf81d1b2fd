#!/usr/bin/env python3
"""Export small, randomly initialised Hugging Face models to ONNX with both
PyTorch exporters, with ONNX Runtime reference outputs in the ONNX
backend-test layout (model.onnx + test_data_set_0/{input,output}_N.pb).

Runs where torch + transformers + onnxruntime are installed (the GPU machine;
no network needed: weights are random, configs are built in code).

  python3 models/export_real.py --out models/real [--only bert,gpt2] [--list]

Each model is <arch>_op<opset>_<ts|dynamo>: ts = TorchScript exporter
(dynamo=False), dynamo = torch.export-based exporter. Inputs are batch 2,
seq 16; row 1 of attention_mask masks its last 5 tokens (as in the bundled
models), so mask handling is exercised.

`--dtype fp16` exports after `model.half()` (as GPU deployments do): names get `_fp16`,
float inputs are float16, and the reference is ONNX Runtime's CPU provider on the fp16
export itself (the export fails loudly where ONNX Runtime cannot run it).
"""
import argparse
import os
import re
import sys
import traceback

import numpy as np

BATCH, SEQ, PAD = 2, 16, 5
ATTN = "eager"  # --attn sdpa exports through torch SDPA instead (name suffix _sdpa)
DTYPE = "fp32"  # --dtype fp16: model.half() before the export (name suffix _fp16)
SMALL = dict(hidden=64, layers=2, heads=4, ffn=128, vocab=500)


def text_inputs(torch, with_type_ids=False, with_mask=True, vocab=None):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, vocab or SMALL["vocab"], (BATCH, SEQ), generator=g)
    inputs = {"input_ids": ids}
    if with_mask:
        mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
        mask[1, SEQ - PAD:] = 0
        inputs["attention_mask"] = mask
    if with_type_ids:
        inputs["token_type_ids"] = torch.zeros(BATCH, SEQ, dtype=torch.int64)
    return inputs


def bart_wrap(torch, m):
    """An encoder-decoder model (BART and its seq2seq siblings: mBART, Pegasus, Marian, M2M100,
    Blenderbot in export_wider.py) as one module of (input_ids, attention_mask): the decoder is fed
    the source ids, and its last hidden state is the output."""
    class BartWrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          decoder_input_ids=input_ids).last_hidden_state
    return BartWrap(m)


def first_output_wrap(torch, m):
    """A transformers model as a module of keyword inputs returning its first output (the last
    hidden state, or the logits of a task model): the builders of export_wider.py and
    export_sweep30.py."""
    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, **kw):
            return self.m(**kw)[0]
    return Wrap(m)


def build(name, torch, tf):
    """Returns (module returning one tensor, example inputs dict, dynamic axes names)."""
    h, L, H, F, V = SMALL["hidden"], SMALL["layers"], SMALL["heads"], SMALL["ffn"], SMALL["vocab"]
    common = dict(attn_implementation=ATTN)

    class Wrap(torch.nn.Module):
        def __init__(self, m, key="last_hidden_state"):
            super().__init__()
            self.m, self.key = m, key

        def forward(self, **kw):
            return self.m(**kw)[self.key] if isinstance(self.key, str) else self.m(**kw)[0]

    if name == "bert":
        cfg = tf.BertConfig(vocab_size=V, hidden_size=h, num_hidden_layers=L, num_attention_heads=H,
                            intermediate_size=F, max_position_embeddings=64, **common)
        return Wrap(tf.BertModel(cfg, add_pooling_layer=False)), text_inputs(torch, True), "text"
    if name == "distilbert":
        cfg = tf.DistilBertConfig(vocab_size=V, dim=h, n_layers=L, n_heads=H, hidden_dim=F,
                                  max_position_embeddings=64, **common)
        return Wrap(tf.DistilBertModel(cfg)), text_inputs(torch), "text"
    if name == "roberta":
        cfg = tf.RobertaConfig(vocab_size=V, hidden_size=h, num_hidden_layers=L, num_attention_heads=H,
                               intermediate_size=F, max_position_embeddings=64, **common)
        return Wrap(tf.RobertaModel(cfg, add_pooling_layer=False)), text_inputs(torch), "text"
    if name == "albert":
        cfg = tf.AlbertConfig(vocab_size=V, embedding_size=32, hidden_size=h, num_hidden_layers=L,
                              num_attention_heads=H, intermediate_size=F, max_position_embeddings=64, **common)
        return Wrap(tf.AlbertModel(cfg, add_pooling_layer=False)), text_inputs(torch, True), "text"
    if name == "electra":
        cfg = tf.ElectraConfig(vocab_size=V, embedding_size=32, hidden_size=h, num_hidden_layers=L,
                               num_attention_heads=H, intermediate_size=F, max_position_embeddings=64, **common)
        return Wrap(tf.ElectraModel(cfg)), text_inputs(torch, True), "text"
    if name == "gpt2":
        cfg = tf.GPT2Config(vocab_size=V, n_embd=h, n_layer=L, n_head=H, n_inner=F, n_positions=64, **common)
        return Wrap(tf.GPT2Model(cfg)), text_inputs(torch), "text"
    if name == "llama":
        cfg = tf.LlamaConfig(vocab_size=V, hidden_size=h, num_hidden_layers=L, num_attention_heads=H,
                             num_key_value_heads=2, intermediate_size=F, max_position_embeddings=64, **common)
        return Wrap(tf.LlamaModel(cfg)), text_inputs(torch), "text"
    if name == "t5enc":
        cfg = tf.T5Config(vocab_size=V, d_model=h, d_kv=h // H, d_ff=F, num_layers=L, num_heads=H,
                          relative_attention_num_buckets=8, **common)
        return Wrap(tf.T5EncoderModel(cfg)), text_inputs(torch), "text"
    if name == "vit":
        cfg = tf.ViTConfig(hidden_size=h, num_hidden_layers=L, num_attention_heads=H, intermediate_size=F,
                           image_size=32, patch_size=8, **common)
        g = torch.Generator().manual_seed(0)
        return Wrap(tf.ViTModel(cfg, add_pooling_layer=False)), {
            "pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g)}, "image"
    if name == "whisperenc":
        cfg = tf.WhisperConfig(vocab_size=V, d_model=h, encoder_layers=L, encoder_attention_heads=H,
                               encoder_ffn_dim=F, decoder_layers=1, decoder_attention_heads=H, decoder_ffn_dim=F,
                               num_mel_bins=16, max_source_positions=16, max_target_positions=16,
                               pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, **common)
        enc = tf.WhisperModel(cfg).get_encoder()
        g = torch.Generator().manual_seed(0)
        return Wrap(enc), {"input_features": torch.randn(BATCH, 16, 32, generator=g)}, "audio"
    # ---- more architectures (tiny: hidden 32, 2 heads) for generality checks ----
    t = dict(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=64, **common)
    if name == "bart":
        cfg = tf.BartConfig(vocab_size=200, d_model=32, encoder_layers=1, decoder_layers=1,
                            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                            decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
                            eos_token_id=2, decoder_start_token_id=2, **common)
        return bart_wrap(torch, tf.BartModel(cfg)), text_inputs(torch, vocab=200), "text"
    if name == "mistral":
        return Wrap(tf.MistralModel(tf.MistralConfig(num_key_value_heads=1, **t))), text_inputs(torch, vocab=200), "text"
    if name == "qwen2":
        return Wrap(tf.Qwen2Model(tf.Qwen2Config(num_key_value_heads=1, **t))), text_inputs(torch, vocab=200), "text"
    if name == "phi3":
        return Wrap(tf.Phi3Model(tf.Phi3Config(num_key_value_heads=2, pad_token_id=0, **t))), \
            text_inputs(torch, vocab=200), "text"
    if name == "gemma":
        return Wrap(tf.GemmaModel(tf.GemmaConfig(num_key_value_heads=1, head_dim=16, **t))), \
            text_inputs(torch, vocab=200), "text"
    if name == "opt":
        cfg = tf.OPTConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           ffn_dim=64, word_embed_proj_dim=32, max_position_embeddings=64, pad_token_id=1, **common)
        return Wrap(tf.OPTModel(cfg)), text_inputs(torch, vocab=200), "text"
    if name == "gptneox":
        return Wrap(tf.GPTNeoXModel(tf.GPTNeoXConfig(rotary_pct=0.5, **t))), text_inputs(torch, vocab=200), "text"
    if name == "bloom":
        cfg = tf.BloomConfig(vocab_size=200, hidden_size=32, n_layer=2, n_head=2, **common)
        return Wrap(tf.BloomModel(cfg)), text_inputs(torch, vocab=200), "text"
    if name == "mpnet":
        cfg = tf.MPNetConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, max_position_embeddings=64, **common)
        return Wrap(tf.MPNetModel(cfg, add_pooling_layer=False)), text_inputs(torch, vocab=200), "text"
    if name == "cliptext":
        cfg = tf.CLIPTextConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=64, **common)
        return Wrap(tf.CLIPTextModel(cfg)), text_inputs(torch, vocab=200), "text"
    if name == "swin":
        cfg = tf.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 2],
                            window_size=4, **common)
        g = torch.Generator().manual_seed(0)
        return Wrap(tf.SwinModel(cfg, add_pooling_layer=False)), {
            "pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g)}, "image"
    if name == "debertav2":
        cfg = tf.DebertaV2Config(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=64, relative_attention=True,
                                 position_buckets=8, pos_att_type=["p2c", "c2p"], **common)
        return Wrap(tf.DebertaV2Model(cfg)), text_inputs(torch, vocab=200), "text"
    # ---- architectures added in session 2 (tiny configs; 17ts + 18dynamo) ----
    g = torch.Generator().manual_seed(0)
    image = {"pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g)}
    txt = text_inputs(torch, vocab=200)
    if name == "phi":
        return Wrap(tf.PhiModel(tf.PhiConfig(partial_rotary_factor=0.5, **t))), txt, "text"
    if name == "gptj":
        cfg = tf.GPTJConfig(vocab_size=200, n_embd=32, n_layer=2, n_head=2, n_inner=64, rotary_dim=8, n_positions=64,
                            **common)
        return Wrap(tf.GPTJModel(cfg)), txt, "text"
    if name == "falcon":
        cfg = tf.FalconConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                              new_decoder_architecture=False, multi_query=True, parallel_attn=True, alibi=False,
                              bias=False, max_position_embeddings=64, **common)
        return Wrap(tf.FalconModel(cfg)), txt, "text"
    if name == "bigcode":
        cfg = tf.GPTBigCodeConfig(vocab_size=200, n_embd=32, n_layer=2, n_head=2, n_inner=64, n_positions=64,
                                  multi_query=True, **common)
        return Wrap(tf.GPTBigCodeModel(cfg)), txt, "text"
    if name == "qwen3":
        return Wrap(tf.Qwen3Model(tf.Qwen3Config(num_key_value_heads=1, head_dim=16, **t))), txt, "text"
    if name == "stablelm":
        return Wrap(tf.StableLmModel(tf.StableLmConfig(num_key_value_heads=2, partial_rotary_factor=0.25, **t))), \
            txt, "text"
    if name == "gemma2":
        return Wrap(tf.Gemma2Model(tf.Gemma2Config(num_key_value_heads=1, head_dim=16, **t))), txt, "text"
    if name == "mixtral":
        cfg = tf.MixtralConfig(num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2, **t)
        return Wrap(tf.MixtralModel(cfg)), txt, "text"
    if name == "modernbert":
        cfg = tf.ModernBertConfig(vocab_size=200, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=2, max_position_embeddings=64, pad_token_id=0, **common)
        return Wrap(tf.ModernBertModel(cfg)), txt, "text"
    if name == "roformer":
        cfg = tf.RoFormerConfig(vocab_size=200, embedding_size=32, hidden_size=32, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=64, max_position_embeddings=64, **common)
        return Wrap(tf.RoFormerModel(cfg)), txt, "text"
    if name == "mobilebert":
        cfg = tf.MobileBertConfig(vocab_size=200, hidden_size=64, embedding_size=32, intra_bottleneck_size=32,
                                  true_hidden_size=32, num_attention_heads=2, num_hidden_layers=2, intermediate_size=64,
                                  num_feedforward_networks=2, max_position_embeddings=64, **common)
        return Wrap(tf.MobileBertModel(cfg, add_pooling_layer=False)), text_inputs(torch, True, vocab=200), "text"
    if name == "deberta":
        cfg = tf.DebertaConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=64, relative_attention=True,
                               pos_att_type=["p2c", "c2p"], **common)
        return Wrap(tf.DebertaModel(cfg)), txt, "text"
    # ---- added in session 20 (torch 2.15 / transformers 5.25 here; 17ts + 18dynamo): decoders whose
    # attention differs in a detail — q/k norms, sliding windows, partial or interleaved rotary,
    # NoPE layers ----
    t4 = dict(t, num_attention_heads=4, num_key_value_heads=2, head_dim=8)
    newer = {
        "gemma3": lambda: tf.Gemma3TextModel(tf.Gemma3TextConfig(sliding_window=8, **t4)),
        "cohere": lambda: tf.CohereModel(tf.CohereConfig(**t4)),
        "cohere2": lambda: tf.Cohere2Model(tf.Cohere2Config(sliding_window=8, **t4)),
        "starcoder2": lambda: tf.Starcoder2Model(tf.Starcoder2Config(sliding_window=8, **t4)),
        "nemotron": lambda: tf.NemotronModel(tf.NemotronConfig(partial_rotary_factor=0.5, **t4)),
        "glm": lambda: tf.GlmModel(tf.GlmConfig(partial_rotary_factor=0.5, pad_token_id=0, **t4)),
        "glm4": lambda: tf.Glm4Model(tf.Glm4Config(partial_rotary_factor=0.5, pad_token_id=0, **t4)),
        "persimmon": lambda: tf.PersimmonModel(tf.PersimmonConfig(partial_rotary_factor=0.5, qk_layernorm=True,
                                                                  **{k: x for k, x in t.items()})),
        "smollm3": lambda: tf.SmolLM3Model(tf.SmolLM3Config(no_rope_layer_interval=2, pad_token_id=0, **t4)),
        "olmo": lambda: tf.OlmoModel(tf.OlmoConfig(**t4)),
        "olmo3": lambda: tf.Olmo3Model(tf.Olmo3Config(sliding_window=8, **t4)),
        "helium": lambda: tf.HeliumModel(tf.HeliumConfig(**t4)),
        "arcee": lambda: tf.ArceeModel(tf.ArceeConfig(**t4)),
        "ernie45": lambda: tf.Ernie4_5Model(tf.Ernie4_5Config(**t4)),
        "exaone4": lambda: tf.Exaone4Model(tf.Exaone4Config(sliding_window=8, **t4)),
        "seedoss": lambda: tf.SeedOssModel(tf.SeedOssConfig(**t4)),
        "esm": lambda: tf.EsmModel(tf.EsmConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2,
                                               num_attention_heads=2, intermediate_size=64,
                                               max_position_embeddings=64, position_embedding_type="rotary",
                                               pad_token_id=1, mask_token_id=2, **common), add_pooling_layer=False),
    }
    if name in newer:
        return Wrap(newer[name]()), txt, "text"
    v = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32,
             patch_size=8, **common)
    if name == "deit":
        return Wrap(tf.DeiTModel(tf.DeiTConfig(**v), add_pooling_layer=False)), image, "image"
    if name == "beit":
        return Wrap(tf.BeitModel(tf.BeitConfig(use_relative_position_bias=True, **v), add_pooling_layer=False)), \
            image, "image"
    if name == "dinov2":
        v2 = {k: x for k, x in v.items() if k != "intermediate_size"}
        return Wrap(tf.Dinov2Model(tf.Dinov2Config(mlp_ratio=2, **v2))), image, "image"
    if name == "clipvision":
        return Wrap(tf.CLIPVisionModel(tf.CLIPVisionConfig(**v))), image, "image"
    if name == "wav2vec2":
        cfg = tf.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                num_conv_pos_embedding_groups=2, **common)
        return Wrap(tf.Wav2Vec2Model(cfg)), {"input_values": torch.randn(BATCH, 400, generator=g)}, "audio"
    if name == "convnext":
        cfg = tf.ConvNextConfig(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], image_size=32)
        return Wrap(tf.ConvNextModel(cfg)), image, "image"
    raise KeyError(name)


ARCHS = ["bert", "distilbert", "roberta", "albert", "electra", "gpt2", "llama", "t5enc", "vit", "whisperenc"]
# Tiny extra architectures for generality checks: `--only` them explicitly or use `--more`.
MORE_ARCHS = ["bart", "mistral", "qwen2", "phi3", "gemma", "opt", "gptneox", "bloom", "mpnet", "cliptext", "swin",
              "debertav2"]
# Added in session 2 for unseen-architecture checks: `--extra` (variants 17ts and 18dynamo).
EXTRA_ARCHS = ["phi", "gptj", "falcon", "bigcode", "qwen3", "stablelm", "gemma2", "mixtral", "modernbert", "roformer",
               "mobilebert", "deberta", "deit", "beit", "dinov2", "clipvision", "wav2vec2", "convnext"]
# Added in session 20 (decoders with q/k norms, sliding windows, partial rotary, NoPE layers,
# ESM's rotary encoder): `--newer` (variants 17ts and 18dynamo). Qwen2-MoE and GPT-OSS (experts,
# attention sinks) were tried and neither exporter of torch 2.15 converts their expert routing
# (aten::histc at opset 17; transformers.grouped_mm_fallback in dynamo).
NEWER_ARCHS = ["gemma3", "cohere", "cohere2", "starcoder2", "nemotron", "glm", "glm4", "persimmon", "smollm3", "olmo",
               "olmo3", "helium", "arcee", "ernie45", "exaone4", "seedoss", "esm"]
# (opset, exporter) variants per model; TorchScript at 14 and 17, dynamo at 18.
VARIANTS = [(14, "ts"), (17, "ts"), (18, "dynamo")]


def save_pb(tensor_np, path, name):
    from onnx import numpy_helper
    t = numpy_helper.from_array(np.asarray(tensor_np), name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def parse_variants(text, default):
    """"17ts,18dynamo" -> [(17, "ts"), (18, "dynamo")]; empty: default. Any opset: "23dynamo"
    exports scaled_dot_product_attention as ONNX's Attention op."""
    if not text:
        return default
    return [(int(m.group(1)), m.group(2))
            for m in (re.fullmatch(r"(\d+)(ts|dynamo)", w) for w in sorted(set(text.split(",")))) if m]


def run_exports(jobs, export, torch):
    """export(*job) for every job (name, opset, exporter[, static]), each seeded alike; prints one
    line per export (its (name, nodes, max error[, outputs]) result) and keeps going past a failure,
    printed with its first message line (traceback on stderr). Returns the number that failed.
    Shared by the export scripts in models/."""
    failures = 0
    for job in jobs:
        torch.manual_seed(0)
        try:
            name, n, err, *extra = export(*job)
            outs = f", {extra[0]} outputs" if extra else ""
            print(f"exported {name}: {n} nodes{outs}, ORT vs PyTorch max abs {err:.2e}", flush=True)
        except Exception as e:  # keep going: one exporter failing must not stop the rest
            failures += 1
            static = " static" if len(job) > 3 and job[3] else ""
            why = str(e).splitlines()[0][:300] if str(e) else ""
            print(f"FAILED {job[0]} op{job[1]} {job[2]}{static}: {type(e).__name__}: {why}", flush=True)
            traceback.print_exc(limit=3, file=sys.stderr)
    return failures


def export_one(arch, opset, exporter, out_root, torch, tf):
    import onnx
    import onnxruntime as ort
    model, inputs, kind = build(arch, torch, tf)
    model.eval()
    if DTYPE == "fp16":
        model = model.half()
        inputs = {k: v.half() if v.is_floating_point() else v for k, v in inputs.items()}
    name = f"{arch}_op{opset}_{exporter}" + ("" if ATTN == "eager" else "_" + ATTN) + ("" if DTYPE == "fp32" else "_" + DTYPE)
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
            return self.m(**dict(zip(names, a)))

    pm = Positional(model)
    with torch.no_grad():
        if exporter == "ts":
            dyn = {k: {0: "batch", 1: "seq"} for k in names} if kind == "text" else {k: {0: "batch"} for k in names}
            dyn["out"] = {0: "batch", 1: "seq"} if kind == "text" else {0: "batch"}
            torch.onnx.export(pm, args, path, input_names=names, output_names=["out"], opset_version=opset,
                              dynamic_axes=dyn, dynamo=False)
        else:
            if kind == "text":
                b, s = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=64)
                ds = tuple({0: b, 1: s} for _ in names)
            else:
                b = torch.export.Dim("batch", min=1, max=64)
                ds = tuple({0: b} for _ in names)
            prog = torch.onnx.export(pm, args, dynamic_shapes=(ds,), input_names=names, output_names=["out"],
                                     opset_version=opset, dynamo=True, external_data=False)
            prog.save(path)
    m = onnx.load(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {i.name: inputs[n].numpy() for i, n in zip(sess.get_inputs(), names)}
    try:
        outs = sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001
        # ONNX Runtime 1.2x's RotaryEmbedding (opset 23) does not broadcast a cos/sin cache of
        # batch 1 over batch 2: PyTorch's output is the reference then (PROVENANCE.md says so).
        print(f"note: {name}: ONNX Runtime cannot run the export ({str(e).splitlines()[0][:160]}); "
              "reference from PyTorch", flush=True)
        with torch.no_grad():
            outs = [pm(*args).numpy()]
    for i, (n, x) in enumerate(zip(names, args)):
        save_pb(x.numpy(), os.path.join(d, "test_data_set_0", f"input_{i}.pb"), m.graph.input[i].name)
    for i, o in enumerate(outs):
        save_pb(o, os.path.join(d, "test_data_set_0", f"output_{i}.pb"), m.graph.output[i].name)
    with torch.no_grad():
        ref = pm(*args)
    err = float(np.abs(ref.float().numpy() - outs[0].astype(np.float32)).max())
    return name, len(m.graph.node), err


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models/real")
    ap.add_argument("--only", default="", help="comma-separated architectures (default: all)")
    ap.add_argument("--variants", default="", help="comma-separated like 14ts,17ts,18dynamo (default: all)")
    ap.add_argument("--attn", default="eager", help="attn_implementation: eager (default) or sdpa")
    ap.add_argument("--more", action="store_true", help="export MORE_ARCHS (tiny configs) instead")
    ap.add_argument("--extra", action="store_true", help="export EXTRA_ARCHS (tiny configs) instead")
    ap.add_argument("--newer", action="store_true", help="export NEWER_ARCHS (tiny configs) instead")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16"], help="fp16: model.half() before the export")
    a = ap.parse_args()
    if a.list:
        print("\n".join(ARCHS + MORE_ARCHS + EXTRA_ARCHS + NEWER_ARCHS))
        return 0
    global ATTN, DTYPE
    ATTN, DTYPE = a.attn, a.dtype
    import torch
    import transformers as tf
    archs = a.only.split(",") if a.only else (
        MORE_ARCHS if a.more else EXTRA_ARCHS if a.extra else NEWER_ARCHS if a.newer else ARCHS)
    jobs = [(arch, op, ex) for arch in archs for op, ex in parse_variants(a.variants, VARIANTS)]
    failures = run_exports(jobs, lambda arch, op, ex: export_one(arch, op, ex, a.out, torch, tf), torch)
    return 1 if failures == len(jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
