#!/usr/bin/env python3
"""Export small, randomly initialised Hugging Face decoders WITH a KV cache (one
generation step: past_key_values in, present out) through both PyTorch exporters,
with ONNX Runtime reference outputs in the ONNX backend-test layout.

Runs where torch + transformers + onnxruntime are installed (the GPU machine; no
network: configs are built in code, weights are random).

  python3 models/export_kv_cache.py --out models/exported [--only gpt2,llama] [--variants 17ts,18dynamo]

Each model is <arch>_kv_op<opset>_<ts|dynamo>[_static]:
  inputs : input_ids [batch, seq], attention_mask [batch, past + seq],
           past_key_values.<i>.key / .value [batch, kv_heads, past, head_dim] per layer
  outputs: last_hidden_state [batch, seq, hidden], present.<i>.key / .value
           [batch, kv_heads, past + seq, head_dim]
test_data_set_0 decodes one token after 5 cached (S_q = 1), test_data_set_1 appends 3
tokens after 4 cached (S_q > 1); batch 2, row 1 left-padded (its first 2 cached positions
are padding; position_ids are not given, as HF generate() without padding-aware
positions). `_static` exports use no dynamic dims (shape of data set 1) and get one
data set. The export is traced at past=4, seq=3 so that no dim is specialised to 1.

`--dtype fp16` exports the same models after `model.half()` (what GPU deployments do, as
Optimum's --dtype fp16): names get `_fp16`, the past tensors are float16 and the references
are ONNX Runtime's on the fp16 export itself (its CPU provider runs every op of these graphs in
fp16); where it lacks a kernel the reference is ONNX Runtime's on the fp32 twin (the same
weights exported from `model.float()`), rounded to fp16, and the script says so.

Architectures: gpt2 (MHA), llama (GQA 4/2), mistral (GQA, sliding window larger than
any test length), qwen2 (GQA, QKV biases), falcon-style multi-query via gpt_bigcode
(MQA); with --more: phi3, gemma, gemma2 (soft-capping), qwen3 (q/k norm), granite (attention
multiplier), olmo2, stablelm and phi (partial rotary), gptneox, falcon (new decoder
architecture), opt, gptj (build_more says what each adds). Afterwards: `python3 tests/py/test_attention_kv_cache.py --bin build/bin --src .`
checks that every block fuses with past/present (model names contain "_kv").
"""
import argparse
import os
import sys

import numpy as np

from export_real import parse_variants, run_exports, save_pb  # models/ is the script's folder: on sys.path

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 64, 2, 4, 2, 128, 500
DATA = [(5, 1), (4, 3)]  # (past, new tokens) per test data set
TRACE = (4, 3)
BATCH = 2


def build(arch, tf):
    common = dict(vocab_size=VOCAB, attn_implementation=ATTN)
    if arch == "gpt2":
        cfg = tf.GPT2Config(n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_inner=FFN, n_positions=64, **common)
        return tf.GPT2Model(cfg), HEADS, HIDDEN // HEADS
    if arch == "bigcode":
        cfg = tf.GPTBigCodeConfig(n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_inner=FFN, n_positions=64,
                                  multi_query=True, **common)
        return tf.GPTBigCodeModel(cfg), 1, HIDDEN // HEADS
    kw = dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
              intermediate_size=FFN, max_position_embeddings=64, **common)
    if arch == "llama":
        return tf.LlamaModel(tf.LlamaConfig(**kw)), KV_HEADS, HIDDEN // HEADS
    if arch == "mistral":
        return tf.MistralModel(tf.MistralConfig(sliding_window=4096, **kw)), KV_HEADS, HIDDEN // HEADS
    if arch == "qwen2":
        return tf.Qwen2Model(tf.Qwen2Config(**kw)), KV_HEADS, HIDDEN // HEADS
    return build_more(arch, tf, kw, common)


def build_more(arch, tf, kw, common):
    """--more: decoder families whose cache form nobody fused before (session 18)."""
    hd = HIDDEN // HEADS
    if arch == "phi3":  # packed qkv_proj
        return tf.Phi3Model(tf.Phi3Config(pad_token_id=0, **kw)), KV_HEADS, hd
    if arch == "gemma":  # head_dim given, embeddings scaled, GeGLU
        return tf.GemmaModel(tf.GemmaConfig(head_dim=hd, **kw)), KV_HEADS, hd
    if arch == "gemma2":  # attention logit soft-capping, alternate sliding-window layers
        return tf.Gemma2Model(tf.Gemma2Config(head_dim=hd, sliding_window=4096, **kw)), KV_HEADS, hd
    if arch == "qwen3":  # per-head q/k RMSNorm before rotary
        return tf.Qwen3Model(tf.Qwen3Config(head_dim=hd, **kw)), KV_HEADS, hd
    if arch == "granite":  # attention_multiplier instead of 1/sqrt(head_dim)
        return tf.GraniteModel(tf.GraniteConfig(attention_multiplier=0.05, **kw)), KV_HEADS, hd
    if arch == "olmo2":  # q/k RMSNorm over the whole projection
        return tf.Olmo2Model(tf.Olmo2Config(**kw)), KV_HEADS, hd
    if arch == "stablelm":  # partial rotary, LayerNorm
        return tf.StableLmModel(tf.StableLmConfig(partial_rotary_factor=0.25, **kw)), KV_HEADS, hd
    if arch == "phi":  # partial rotary, parallel block, dense q/k/v with biases
        return tf.PhiModel(tf.PhiConfig(partial_rotary_factor=0.5, **kw)), KV_HEADS, hd
    mha = dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, max_position_embeddings=64,
               **common)
    if arch == "gptneox":  # packed, interleaved QKV; partial rotary
        return tf.GPTNeoXModel(tf.GPTNeoXConfig(intermediate_size=FFN, rotary_pct=0.25, **mha)), HEADS, hd
    if arch == "falcon":  # new decoder architecture: grouped kv heads, parallel attention
        return tf.FalconModel(tf.FalconConfig(new_decoder_architecture=True, num_kv_heads=KV_HEADS, **mha)), KV_HEADS, hd
    if arch == "opt":  # learned positions (from the mask's cumsum), biases, scale on q
        return tf.OPTModel(tf.OPTConfig(ffn_dim=FFN, word_embed_proj_dim=HIDDEN, **mha)), HEADS, hd
    if arch == "gptj":  # interleaved rotary on the first rotary_dim dims
        cfg = tf.GPTJConfig(n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_inner=FFN, n_positions=64, rotary_dim=hd // 2,
                            **common)
        return tf.GPTJModel(cfg), HEADS, hd
    raise ValueError(f"unknown architecture {arch}")


ARCHS = ["gpt2", "llama", "mistral", "qwen2", "bigcode"]
MORE_ARCHS = ["phi3", "gemma", "gemma2", "qwen3", "granite", "olmo2", "stablelm", "phi", "gptneox", "falcon", "opt",
              "gptj"]
VARIANTS = [(17, "ts"), (18, "dynamo")]
ATTN = "eager"
DTYPE = None  # torch dtype of the model (main() sets it; torch is imported there)


def make_cache(tf, flat, layers):
    """A transformers Cache holding the flat (key, value, key, value, ...) tensors."""
    cache = tf.DynamicCache()
    for i in range(layers):
        cache.update(flat[2 * i], flat[2 * i + 1], i)
    return cache


def cache_tensors(cache, layers):
    out = []
    if hasattr(cache, "layers"):  # transformers >= 4.56 / 5
        for i in range(layers):
            out += [cache.layers[i].keys, cache.layers[i].values]
    else:
        for i in range(layers):
            out += [cache.key_cache[i], cache.value_cache[i]]
    return out


def step_inputs(torch, past, seq, kv_heads, head_dim, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (BATCH, seq), generator=g)
    mask = torch.ones(BATCH, past + seq, dtype=torch.int64)
    mask[1, :2] = 0
    flat = []
    for _ in range(LAYERS):
        flat += [torch.randn(BATCH, kv_heads, past, head_dim, generator=g).to(DTYPE) for _ in range(2)]
    return [ids, mask] + flat


def export_one(arch, opset, exporter, static, out_root, torch, tf):
    import onnx
    import onnxruntime as ort
    model, kv_heads, head_dim = build(arch, tf)
    model.eval()
    if DTYPE != torch.float32:
        model = model.to(DTYPE)

    class Step(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, *past):
            out = self.m(input_ids=input_ids, attention_mask=attention_mask, past_key_values=make_cache(tf, past, LAYERS),
                         use_cache=True)
            return (out.last_hidden_state, *cache_tensors(out.past_key_values, LAYERS))

    step = Step(model)
    past_names = [f"past_key_values.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    present_names = [f"present.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    in_names = ["input_ids", "attention_mask"] + past_names
    out_names = ["last_hidden_state"] + present_names
    name = f"{arch}_kv_op{opset}_{exporter}" + ("_static" if static else "") + ("" if ATTN == "eager" else "_" + ATTN)
    if DTYPE != torch.float32:
        name += "_" + str(DTYPE).replace("torch.float16", "fp16").replace("torch.bfloat16", "bf16")
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    trace = step_inputs(torch, *(DATA[1] if static else TRACE), kv_heads, head_dim, seed=1)
    with torch.no_grad():
        if exporter == "ts":
            dyn = None
            if not static:
                # Optimum's dim names: the mask length is written as the sum it is.
                total = "past_sequence_length + sequence_length"
                dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"}, "attention_mask": {0: "batch_size", 1: total}}
                dyn.update({n: {0: "batch_size", 2: "past_sequence_length"} for n in past_names})
                dyn["last_hidden_state"] = {0: "batch_size", 1: "sequence_length"}
                dyn.update({n: {0: "batch_size", 2: total} for n in present_names})
            torch.onnx.export(step, tuple(trace), path, input_names=in_names, output_names=out_names,
                              opset_version=opset, dynamic_axes=dyn, dynamo=False)
        else:
            ds = None
            if not static:
                auto = torch.export.Dim.AUTO
                # torch.export matches forward(input_ids, attention_mask, *past): the
                # varargs are ONE element holding a tuple (a flat 2 + 2L tuple was refused:
                # "inputs has 3 elements, but dynamic_shapes has 6", 2026-12-01 run).
                ds = ({0: auto, 1: auto}, {0: auto, 1: auto}, tuple({0: auto, 2: auto} for _ in range(len(in_names) - 2)))
            prog = torch.onnx.export(step, tuple(trace), dynamic_shapes=ds, input_names=in_names,
                                     output_names=out_names, opset_version=opset, dynamo=True, external_data=False)
            prog.save(path)
    if exporter == "dynamo":  # per-node stack traces: most of a tiny model's bytes
        m = onnx.load(path)
        for n in m.graph.node:
            del n.metadata_props[:]
        onnx.save(m, path)
    m = onnx.load(path)
    try:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        twin = None
    except Exception as e:  # no fp16 CPU kernel for some op: the fp32 twin gives the reference
        print(f"note: {name}: ONNX Runtime cannot run the {DTYPE} export ({str(e).splitlines()[0][:160]}); "
              "references from the fp32 twin", flush=True)
        twin = _fp32_twin(step, trace, in_names, out_names, opset, exporter, static, d, torch, ort)
        sess = twin
    worst = 0.0
    for k, (past, seq) in enumerate([DATA[1]] if static else DATA):
        inputs = step_inputs(torch, past, seq, kv_heads, head_dim, seed=10 + k)
        feeds = {i.name: (x.float() if twin is not None and x.is_floating_point() else x).numpy()
                 for i, x in zip(sess.get_inputs(), inputs)}
        try:
            outs = sess.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            # ONNX Runtime 1.2x's RotaryEmbedding (opset 23) does not broadcast a cos/sin cache of
            # batch 1 over batch 2: PyTorch's outputs are the reference then (said here and in
            # PROVENANCE.md).
            print(f"note: {name}: ONNX Runtime cannot run the export ({str(e).splitlines()[0][:160]}); "
                  "references from PyTorch", flush=True)
            with torch.no_grad():
                outs = [r.numpy() for r in step(*inputs)]
        if twin is not None:
            outs = [o.astype(np.float16) if DTYPE == torch.float16 else o for o in outs]
        td = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(td, exist_ok=True)
        for i, x in enumerate(inputs):
            save_pb(x.numpy(), os.path.join(td, f"input_{i}.pb"), m.graph.input[i].name)
        for i, o in enumerate(outs):
            save_pb(o, os.path.join(td, f"output_{i}.pb"), m.graph.output[i].name)
        with torch.no_grad():
            ref = step(*inputs)
        worst = max(worst, max(float(np.abs(r.float().numpy() - o.astype(np.float32)).max()) for r, o in zip(ref, outs)))
    return name, len(m.graph.node), worst


def _fp32_twin(step, trace, in_names, out_names, opset, exporter, static, d, torch, ort):
    """An ORT session on the fp32 export of the same weights (a temporary file)."""
    import copy
    import tempfile
    twin = copy.deepcopy(step).float()
    path = os.path.join(tempfile.mkdtemp(), "twin.onnx")
    trace32 = [x.float() if x.is_floating_point() else x for x in trace]
    with torch.no_grad():
        if exporter == "ts":
            torch.onnx.export(twin, tuple(trace32), path, input_names=in_names, output_names=out_names,
                              opset_version=opset, dynamo=False)
        else:
            torch.onnx.export(twin, tuple(trace32), input_names=in_names, output_names=out_names,
                              opset_version=opset, dynamo=True, external_data=False).save(path)
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models/exported")
    ap.add_argument("--only", default="", help="comma-separated architectures (default: all of ARCHS)")
    ap.add_argument("--more", action="store_true",
                    help="the session-18 families instead: " + ", ".join(MORE_ARCHS))
    ap.add_argument("--variants", default="", help="comma-separated like 17ts,18dynamo (default: both)")
    ap.add_argument("--attn", default="eager", help="attn_implementation: eager (default) or sdpa")
    ap.add_argument("--static", action="store_true", help="also export static-shape variants")
    ap.add_argument("--tiny", action="store_true",
                    help="hidden 32, FFN 64, vocab 200 (a quarter of the bytes; what the corpus in the repo uses "
                         "since session 4, where the tree that travels to the GPU machine is capped)")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"],
                    help="model dtype (fp16/bf16: model.half() / .bfloat16() before the export; names get _fp16/_bf16)")
    a = ap.parse_args()
    global ATTN, HIDDEN, FFN, VOCAB, DTYPE
    ATTN = a.attn
    if a.tiny:
        HIDDEN, FFN, VOCAB = 32, 64, 200
    import torch
    DTYPE = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    import transformers as tf
    archs = a.only.split(",") if a.only else (MORE_ARCHS if a.more else ARCHS)
    variants = parse_variants(a.variants, VARIANTS)
    jobs = [(arch, op, ex, st) for arch in archs for op, ex in variants for st in ([False, True] if a.static else [False])]
    failures = run_exports(jobs, lambda arch, op, ex, st: export_one(arch, op, ex, st, a.out, torch, tf), torch)
    return 1 if failures == len(jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
