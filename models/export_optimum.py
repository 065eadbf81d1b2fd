#!/usr/bin/env python3
"""Export small, randomly initialised Hugging Face models through Optimum's ONNX exporter
(`optimum-onnx`: the form most users download from the Hub, `optimum-cli export onnx`),
with ONNX Runtime reference outputs in the ONNX backend-test layout.

Needs torch, transformers < 4.58, optimum-onnx and onnxruntime (a venv; no network:
configs are built in code, weights are random, nothing is downloaded).

  python3 models/export_optimum.py --out /tmp/optx [--only gpt2,t5] [--keep-hf /tmp/hf]

Every ONNX file Optimum writes becomes a folder `optimum_<arch>_<file stem>` (for example
`optimum_t5_decoder_with_past_model`) holding model.onnx and test_data_set_0: inputs made
from the graph's own input names and dims (batch 2; 6 new tokens, or 1 after 5 cached
for a graph with past_key_values, plus a second set prefilling 6 tokens into an empty cache; row
1 of every attention mask pads its first 2 positions), outputs from ONNX Runtime on the
export: the reference. Decoder-only exports with a cache are named `optimum_<arch>_kv`.
"""
import argparse
import os
import shutil
import sys

import numpy as np

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 64, 2, 4, 2, 128, 500
BATCH, SEQ, PAST = 2, 6, 5

# arch -> (task, builder(tf) -> model)
def builders():
    def dec(cls_cfg, cls_model, **extra):
        def b(tf):
            kw = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      intermediate_size=FFN, max_position_embeddings=128)
            kw.update(extra)
            return getattr(tf, cls_model)(getattr(tf, cls_cfg)(**kw))
        return b

    def gpt2(tf):
        return tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
                                                n_inner=FFN, n_positions=128))

    def bert(tf):
        return tf.BertModel(tf.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                          num_attention_heads=HEADS, intermediate_size=FFN,
                                          max_position_embeddings=128))

    def bert_mlm(tf):
        return tf.BertForMaskedLM(tf.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                                num_attention_heads=HEADS, intermediate_size=FFN,
                                                max_position_embeddings=128))

    def t5(tf):
        return tf.T5ForConditionalGeneration(tf.T5Config(vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS,
                                                         d_ff=FFN, num_layers=LAYERS, num_heads=HEADS,
                                                         relative_attention_num_buckets=8,
                                                         decoder_start_token_id=0))

    def bart(tf):
        return tf.BartForConditionalGeneration(tf.BartConfig(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS,
                                                             decoder_layers=LAYERS, encoder_attention_heads=HEADS,
                                                             decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
                                                             decoder_ffn_dim=FFN, max_position_embeddings=128))

    def whisper(tf):
        return tf.WhisperForConditionalGeneration(tf.WhisperConfig(
            vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
            encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN,
            num_mel_bins=16, max_source_positions=1500, max_target_positions=64,
            decoder_start_token_id=1, pad_token_id=0, eos_token_id=2, bos_token_id=1))

    def vit(tf):
        return tf.ViTForImageClassification(tf.ViTConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                                         num_attention_heads=HEADS, intermediate_size=FFN,
                                                         image_size=32, patch_size=8, num_labels=5))

    def cfg_model(cfg_cls, model_cls, **kw):
        def b(tf):
            return getattr(tf, model_cls)(getattr(tf, cfg_cls)(**kw))
        return b

    more = {
        "opt": ("text-generation-with-past", cfg_model("OPTConfig", "OPTForCausalLM", vocab_size=VOCAB, hidden_size=HIDDEN,
                                                       num_hidden_layers=LAYERS, num_attention_heads=HEADS, ffn_dim=FFN,
                                                       word_embed_proj_dim=HIDDEN, max_position_embeddings=128)),
        "bloom": ("text-generation-with-past", cfg_model("BloomConfig", "BloomForCausalLM", vocab_size=VOCAB,
                                                         hidden_size=HIDDEN, n_layer=LAYERS, n_head=HEADS)),
        "falcon": ("text-generation-with-past", cfg_model("FalconConfig", "FalconForCausalLM", vocab_size=VOCAB,
                                                          hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                                          num_attention_heads=HEADS, new_decoder_architecture=True,
                                                          num_kv_heads=KV_HEADS)),
        "gpt_neox": ("text-generation-with-past", cfg_model("GPTNeoXConfig", "GPTNeoXForCausalLM", vocab_size=VOCAB,
                                                            hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                                            num_attention_heads=HEADS, intermediate_size=FFN,
                                                            rotary_pct=0.25, max_position_embeddings=128)),
        "gptj": ("text-generation-with-past", cfg_model("GPTJConfig", "GPTJForCausalLM", vocab_size=VOCAB, n_embd=HIDDEN,
                                                        n_layer=LAYERS, n_head=HEADS, rotary_dim=8, n_positions=128)),
        "codegen": ("text-generation-with-past", cfg_model("CodeGenConfig", "CodeGenForCausalLM", vocab_size=VOCAB,
                                                           n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, rotary_dim=8,
                                                           n_positions=128, n_ctx=128)),
        "marian": ("text2text-generation-with-past", cfg_model(
            "MarianConfig", "MarianMTModel", vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
            encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN,
            max_position_embeddings=128, pad_token_id=0, decoder_start_token_id=0)),
        "roberta": ("feature-extraction", cfg_model("RobertaConfig", "RobertaModel", vocab_size=VOCAB, hidden_size=HIDDEN,
                                                    num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                                    intermediate_size=FFN, max_position_embeddings=130)),
        "distilbert": ("feature-extraction", cfg_model("DistilBertConfig", "DistilBertModel", vocab_size=VOCAB, dim=HIDDEN,
                                                       n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN,
                                                       max_position_embeddings=128)),
        "xlm_roberta": ("text-classification", cfg_model("XLMRobertaConfig", "XLMRobertaForSequenceClassification",
                                                         vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                                         num_attention_heads=HEADS, intermediate_size=FFN,
                                                         max_position_embeddings=130, num_labels=3)),
        "deberta_v2": ("feature-extraction", cfg_model("DebertaV2Config", "DebertaV2Model", vocab_size=VOCAB,
                                                       hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                                       num_attention_heads=HEADS, intermediate_size=FFN,
                                                       max_position_embeddings=128)),
        "clip": ("zero-shot-image-classification", cfg_model(
            "CLIPConfig", "CLIPModel",
            text_config=dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                             intermediate_size=FFN, max_position_embeddings=64),
            vision_config=dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                               intermediate_size=FFN, image_size=32, patch_size=8), projection_dim=32)),
    }
    vision = dict(image_size=32, num_channels=3)
    more.update({
        "segformer": ("semantic-segmentation", cfg_model(
            "SegformerConfig", "SegformerForSemanticSegmentation", num_encoder_blocks=2, depths=[1, 1],
            sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
            mlp_ratios=[2, 2], decoder_hidden_size=32, num_labels=3)),
        "yolos": ("object-detection", cfg_model("YolosConfig", "YolosForObjectDetection", hidden_size=HIDDEN,
                                                num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                                intermediate_size=FFN, image_size=[32, 32], patch_size=8,
                                                num_detection_tokens=4)),
        "swinv2": ("image-classification", cfg_model("Swinv2Config", "Swinv2ForImageClassification", embed_dim=16,
                                                     depths=[1, 1], num_heads=[2, 2], window_size=4, **vision,
                                                     patch_size=2, num_labels=3)),
        "detr": ("object-detection", cfg_model(
            "DetrConfig", "DetrForObjectDetection", use_timm_backbone=False, use_pretrained_backbone=False,
            backbone_config=dict(model_type="resnet", embedding_size=8, hidden_sizes=[8, 16, 16, 16], depths=[1, 1, 1, 1],
                                 out_features=["stage4"]),
            d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=5)),
    })
    return {**{
        "bert": ("feature-extraction", bert),
        "bert_mlm": ("fill-mask", bert_mlm),
        "gpt2": ("text-generation-with-past", gpt2),
        "llama": ("text-generation-with-past", dec("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=KV_HEADS)),
        "mistral": ("text-generation-with-past", dec("MistralConfig", "MistralForCausalLM",
                                                     num_key_value_heads=KV_HEADS, sliding_window=4096)),
        "qwen2": ("text-generation-with-past", dec("Qwen2Config", "Qwen2ForCausalLM", num_key_value_heads=KV_HEADS)),
        "phi3": ("text-generation-with-past", dec("Phi3Config", "Phi3ForCausalLM", num_key_value_heads=KV_HEADS,
                                                  pad_token_id=0)),
        "gemma": ("text-generation-with-past", dec("GemmaConfig", "GemmaForCausalLM", num_key_value_heads=KV_HEADS,
                                                   head_dim=HIDDEN // HEADS)),
        "t5": ("text2text-generation-with-past", t5),
        "bart": ("text2text-generation-with-past", bart),
        "whisper": ("automatic-speech-recognition-with-past", whisper),
        "vit": ("image-classification", vit),
    }, **more}


def has_past_inputs(model_path):
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    return any(i.name.startswith("past_key_values") for i in m.graph.input)


def feeds_for(model_path, seed, seq, past):
    """Inputs from the graph's names and dims (symbolic dims resolved by name)."""
    import onnx
    rng = np.random.default_rng(seed)
    m = onnx.load(model_path, load_external_data=False)
    names = [i.name for i in m.graph.input]
    has_past = any(n.startswith("past_key_values") for n in names)
    enc_seq = 7
    feeds = {}
    for inp in m.graph.input:
        t = inp.type.tensor_type
        dt = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim]
        n = inp.name

        def dim(i, d):
            if isinstance(d, int) and d > 0:
                return d
            s = str(d).lower()
            if i == 0 or "batch" in s:
                return BATCH
            if "encoder" in s:
                return enc_seq
            if "past" in s and "+" not in s:
                return past
            if "+" in s or "total" in s or "attention_mask" in s:
                return past + seq
            return seq

        shape = [dim(i, d) for i, d in enumerate(dims)]
        if n == "pixel_values":
            shape = [BATCH, 3, 32, 32]
        elif n == "input_features":
            shape = [BATCH, 16, 3000]
        if n.startswith("past_key_values") and "encoder" in n:
            shape[2] = enc_seq
        if n in ("input_ids", "decoder_input_ids"):
            feeds[n] = rng.integers(3, VOCAB, size=shape).astype(dt)
        elif "attention_mask" in n:
            if n == "attention_mask" and has_past and "encoder_attention_mask" not in names and \
                    not any("encoder" in x for x in names):
                shape[-1] = past + seq
            a = np.ones(shape, dtype=dt)
            a[1, :2] = 0
            feeds[n] = a
        elif n == "position_ids":
            L = shape[-1]
            feeds[n] = np.tile(np.arange(past, past + L, dtype=dt), (shape[0], 1))
        elif n == "cache_position":
            feeds[n] = np.arange(past, past + shape[-1], dtype=dt)
        elif n == "token_type_ids":
            feeds[n] = np.zeros(shape, dtype=dt)
        elif n == "use_cache_branch":
            feeds[n] = np.array([has_past], dtype=dt)
        elif np.issubdtype(dt, np.floating):
            feeds[n] = rng.standard_normal(shape).astype(dt)
        else:
            feeds[n] = np.zeros(shape, dtype=dt)
    # A decoder with past: its mask spans past + new tokens (self-attention mask).
    if "encoder_hidden_states" in feeds and "encoder_attention_mask" in feeds:
        feeds["encoder_attention_mask"] = np.ones(feeds["encoder_attention_mask"].shape,
                                                  dtype=feeds["encoder_attention_mask"].dtype)
    return feeds


def save_case(src_onnx, out_dir, seed):
    """model.onnx and its data sets: with a KV cache, set 0 decodes one token after 5 cached
    and set 1 is a prefill of 6 tokens with an empty cache (row 1's first two query rows then
    see no unpadded key); without, one set of 6 tokens."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    os.makedirs(out_dir, exist_ok=True)
    m = onnx.load(src_onnx)  # external data (if any) is inlined: the models are tiny
    onnx.save(m, os.path.join(out_dir, "model.onnx"))
    path = os.path.join(out_dir, "model.onnx")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    shapes = [(1, PAST), (SEQ, 0)] if has_past_inputs(path) else [(SEQ, 0)]
    for k, (seq, past) in enumerate(shapes):
        feeds = feeds_for(path, seed + k, seq, past)
        outs = sess.run(None, feeds)
        ds = os.path.join(out_dir, f"test_data_set_{k}")
        os.makedirs(ds, exist_ok=True)
        for i, inp in enumerate(m.graph.input):
            with open(os.path.join(ds, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(feeds[inp.name], inp.name).SerializeToString())
        for i, (o, v) in enumerate(zip(m.graph.output, outs)):
            with open(os.path.join(ds, f"output_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(v), o.name).SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--keep-hf", default="", help="where the random-weight checkpoints go (default: a temp dir)")
    ap.add_argument("--opset", type=int, default=0, help="Optimum's default when 0")
    a = ap.parse_args()
    import tempfile
    import torch
    import transformers as tf
    from optimum.exporters.onnx import main_export
    torch.manual_seed(0)
    table = builders()
    only = [x for x in a.only.split(",") if x]
    hf_root = a.keep_hf or tempfile.mkdtemp(prefix="fuseopt_hf_")
    failed = []
    for k, (arch, (task, build)) in enumerate(table.items()):
        if only and arch not in only:
            continue
        print(f"== {arch} ({task})", flush=True)
        try:
            model = build(tf).eval()
            ck = os.path.join(hf_root, arch)
            model.save_pretrained(ck)
            exp = os.path.join(hf_root, arch + "_onnx")
            shutil.rmtree(exp, ignore_errors=True)
            kw = dict(opset=a.opset) if a.opset else {}
            main_export(ck, output=exp, task=task, no_post_process=False, do_validation=False, **kw)
        except Exception as e:  # noqa: BLE001 - report and go on with the next architecture
            print(f"   export failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}", flush=True)
            failed.append(arch)
            continue
        for f in sorted(os.listdir(exp)):
            if not f.endswith(".onnx"):
                continue
            stem = f[:-5]
            # Decoder-only exports with a cache are one `model.onnx`: named *_kv like the other
            # KV-cache exports (tests/py/test_attention_kv_cache.py checks every *kv* folder).
            name = f"optimum_{arch}_kv" if stem == "model" and task.endswith("-with-past") else f"optimum_{arch}_{stem}"
            try:
                save_case(os.path.join(exp, f), os.path.join(a.out, name), seed=k)
                print(f"   {name}: ok", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"   {name}: reference failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}", flush=True)
                failed.append(name)
    print("failed:", ", ".join(failed) if failed else "none")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
