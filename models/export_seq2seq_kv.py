#!/usr/bin/env python3
"""Export the DECODER of small, randomly initialised Hugging Face encoder-decoder models
with a KV cache (one generation step, the form of Optimum's decoder_with_past_model.onnx)
through both PyTorch exporters, with ONNX Runtime reference outputs in the ONNX
backend-test layout.

Runs where torch + transformers + onnxruntime are installed (no network: configs are
built in code, weights are random).

  python3 models/export_seq2seq_kv.py --out models/exported [--only bart,t5,whisper] [--variants 17ts,18dynamo]

Each model is <arch>dec_kv_op<opset>_<ts|dynamo>:
  inputs : input_ids [batch, seq], attention_mask [batch, past + seq] (not Whisper's),
           encoder_hidden_states [batch, enc, hidden], encoder_attention_mask [batch, enc]
           (not Whisper's), then per layer past_key_values.<i>.decoder.key / .value
           [batch, heads, past, head_dim] (the self-attention cache) and
           past_key_values.<i>.encoder.key / .value [batch, heads, enc, head_dim] (the
           cross-attention cache, computed once from the encoder output)
  outputs: last_hidden_state [batch, seq, hidden], present.<i>.decoder.key / .value
           [batch, heads, past + seq, head_dim]
Each layer has two attention blocks: causal self-attention over the growing cache (past
concatenated with the new rows) and cross-attention over the fixed encoder cache.
test_data_set_0 decodes one token after 5 cached, test_data_set_1 appends 3 after 4;
batch 2, row 1's first 2 cached positions padding and its last 2 encoder positions
masked; 7 encoder positions. Architectures: bart (learned positions, post-norm), t5
(relative position bias in self-attention, no scaling, RMSNorm), whisper (pre-norm, no
masks: its decoder takes none). Tiny configs: hidden 32, 2 layers, 4 heads, FFN 64,
vocabulary 200.
"""
import argparse
import os
import sys

import numpy as np

from export_real import parse_variants, run_exports, save_pb  # models/ is the script's folder: on sys.path

HIDDEN, LAYERS, HEADS, FFN, VOCAB = 32, 2, 4, 64, 200
BATCH, ENC = 2, 7
DATA = [(5, 1), (4, 3)]  # (past, new tokens) per test data set
TRACE = (4, 3)
ARCHS = ["bart", "t5", "whisper"]
VARIANTS = [(17, "ts"), (18, "dynamo")]


def build(arch, tf):
    """The decoder module and whether it takes the two masks."""
    if arch == "bart":
        cfg = tf.BartConfig(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
                            encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
                            decoder_ffn_dim=FFN, max_position_embeddings=64, attn_implementation="eager")
        return tf.BartModel(cfg).get_decoder(), True
    if arch == "t5":
        cfg = tf.T5Config(vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=FFN, num_layers=LAYERS,
                          num_decoder_layers=LAYERS, num_heads=HEADS, relative_attention_num_buckets=8,
                          attn_implementation="eager", is_decoder=True)
        return tf.T5Model(cfg).get_decoder(), True
    if arch == "whisper":
        cfg = tf.WhisperConfig(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
                               encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
                               decoder_ffn_dim=FFN, max_source_positions=16, max_target_positions=64, num_mel_bins=8,
                               attn_implementation="eager", pad_token_id=0, bos_token_id=1, eos_token_id=2,
                               decoder_start_token_id=1)
        return tf.WhisperModel(cfg).get_decoder(), False
    raise ValueError(f"unknown architecture {arch}")


def input_names(masks):
    names = ["input_ids"] + (["attention_mask"] if masks else []) + ["encoder_hidden_states"]
    names += ["encoder_attention_mask"] if masks else []
    for i in range(LAYERS):
        names += [f"past_key_values.{i}.{part}.{kv}" for part in ("decoder", "encoder") for kv in ("key", "value")]
    return names


def step_inputs(torch, masks, past, seq, seed):
    g = torch.Generator().manual_seed(seed)
    head_dim = HIDDEN // HEADS
    x = [torch.randint(1, VOCAB, (BATCH, seq), generator=g)]
    mask = torch.ones(BATCH, past + seq, dtype=torch.int64)
    mask[1, :2] = 0
    enc_mask = torch.ones(BATCH, ENC, dtype=torch.int64)
    enc_mask[1, ENC - 2:] = 0
    x += [mask] if masks else []
    x += [torch.randn(BATCH, ENC, HIDDEN, generator=g)]
    x += [enc_mask] if masks else []
    for _ in range(LAYERS):
        x += [torch.randn(BATCH, HEADS, past, head_dim, generator=g) for _ in range(2)]
        x += [torch.randn(BATCH, HEADS, ENC, head_dim, generator=g) for _ in range(2)]
    return x


def export_one(arch, opset, exporter, out_root, torch, tf):
    import onnx
    import onnxruntime as ort
    decoder, masks = build(arch, tf)
    decoder.eval()
    names = input_names(masks)
    n_fixed = len(names) - 4 * LAYERS

    class Step(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *args):
            fixed, past = args[:n_fixed], args[n_fixed:]
            self_cache, cross_cache = tf.DynamicCache(), tf.DynamicCache()
            for i in range(LAYERS):
                self_cache.update(past[4 * i], past[4 * i + 1], i)
                cross_cache.update(past[4 * i + 2], past[4 * i + 3], i)
            kw = dict(input_ids=fixed[0], past_key_values=tf.EncoderDecoderCache(self_cache, cross_cache), use_cache=True)
            if masks:
                kw.update(attention_mask=fixed[1], encoder_hidden_states=fixed[2], encoder_attention_mask=fixed[3])
            else:
                kw.update(encoder_hidden_states=fixed[1])
            out = self.m(**kw)
            cache = out.past_key_values.self_attention_cache
            flat = []
            for i in range(LAYERS):
                flat += [cache.layers[i].keys, cache.layers[i].values]
            return (out.last_hidden_state, *flat)

    step = Step(decoder)
    out_names = ["last_hidden_state"] + [f"present.{i}.decoder.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    name = f"{arch}dec_kv_op{opset}_{exporter}"
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    trace = step_inputs(torch, masks, *TRACE, seed=1)
    with torch.no_grad():
        if exporter == "ts":
            total = "past_sequence_length + sequence_length"
            dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"},
                   "encoder_hidden_states": {0: "batch_size", 1: "encoder_sequence_length"}}
            if masks:
                dyn["attention_mask"] = {0: "batch_size", 1: total}
                dyn["encoder_attention_mask"] = {0: "batch_size", 1: "encoder_sequence_length"}
            for n in names[n_fixed:]:
                dyn[n] = {0: "batch_size", 2: "past_sequence_length" if ".decoder." in n else "encoder_sequence_length"}
            dyn["last_hidden_state"] = {0: "batch_size", 1: "sequence_length"}
            dyn.update({n: {0: "batch_size", 2: total} for n in out_names[1:]})
            torch.onnx.export(step, tuple(trace), path, input_names=names, output_names=out_names, opset_version=opset,
                              dynamic_axes=dyn, dynamo=False)
        else:
            auto = torch.export.Dim.AUTO
            # forward(*args): one element holding the tuple of every input's dims.
            ds = (tuple({0: auto, 1: auto} if i < n_fixed else {0: auto, 2: auto} for i in range(len(names))),)
            prog = torch.onnx.export(step, tuple(trace), dynamic_shapes=ds, input_names=names, output_names=out_names,
                                     opset_version=opset, dynamo=True, external_data=False)
            prog.save(path)
    m = onnx.load(path)
    for n in m.graph.node:  # the dynamo exporter's per-node stack traces: most of a tiny model's bytes
        del n.metadata_props[:]
    onnx.save(m, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    graph_inputs = [i.name for i in sess.get_inputs()]  # the TorchScript exporter drops unused ones
    worst = 0.0
    for k, (past, seq) in enumerate(DATA):
        x = step_inputs(torch, masks, past, seq, seed=10 + k)
        feeds = {n: t.numpy() for n, t in zip(names, x) if n in graph_inputs}
        outs = sess.run(None, feeds)
        td = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(td, exist_ok=True)
        for n, t in feeds.items():
            save_pb(t, os.path.join(td, f"input_{graph_inputs.index(n)}.pb"), n)
        for i, o in enumerate(outs):
            save_pb(o, os.path.join(td, f"output_{i}.pb"), m.graph.output[i].name)
        with torch.no_grad():
            ref = step(*x)
        worst = max(worst, max(float(np.abs(r.numpy() - o).max()) for r, o in zip(ref, outs)))
    return name, len(m.graph.node), worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models/exported")
    ap.add_argument("--only", default="", help="comma-separated architectures (default: " + ",".join(ARCHS) + ")")
    ap.add_argument("--variants", default="", help="comma-separated like 17ts,18dynamo (default: both)")
    a = ap.parse_args()
    import torch
    import transformers as tf
    archs = a.only.split(",") if a.only else ARCHS
    variants = parse_variants(a.variants, VARIANTS)
    jobs = [(arch, op, ex) for arch in archs for op, ex in variants]
    failures = run_exports(jobs, lambda arch, op, ex: export_one(arch, op, ex, a.out, torch, tf), torch)
    return 1 if failures == len(jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
