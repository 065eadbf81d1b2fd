#!/usr/bin/env python3
"""Export Hugging Face models WITH their task heads (issue 15, part 2) through both
PyTorch exporters, random weights from code-built configs (seeded, no network), with
ONNX Runtime reference outputs (every output) in the ONNX backend-test layout
(model.onnx + test_data_set_N/{input,output}_N.pb).

  python3 models/export_heads.py --out models/exported [--only bert_mlm,gpt2_lm] [--variants 17ts,18dynamo]
  python3 models/export_heads.py --full --out /tmp/heads --only bert_mlm,gpt2_lm --variants 17ts

Models, <arch>_<head>_op<opset>_<ts|dynamo>:
  bert_mlm, roberta_mlm        masked-LM: transform (dense, GELU, LayerNorm), decoder tied to the
                               word embeddings + bias -> logits [B, S, V]
  bert_seqcls, roberta_seqcls  sequence classification: BERT pooler (dense + tanh on token 0) +
                               classifier; RoBERTa's head (dense + tanh + out_proj on <s>)
  bert_tokcls, roberta_tokcls  token classification: one Linear over the sequence output
  bert_qa, roberta_qa          question answering: Linear(hidden, 2) split into start/end logits
  gpt2_lm, llama_lm            causal LM, lm_head tied to the token embedding -> logits
  gpt2_lm_kv, llama_lm_kv      the same, one decoding step with a KV cache (past in, logits +
                               present out; test_data_set_0 = 1 token after 5 cached,
                               test_data_set_1 = 3 after 4; as models/export_kv_cache.py)
  vit_imgcls                   image classification: final LayerNorm, token 0, classifier
  clip                         both towers + projections + L2 normalisation + logit scale ->
                               logits_per_image, logits_per_text, text_embeds, image_embeds
  sbert_mean                   sentence embedding (sentence-transformers style): BERT, mean
                               pooling over the attention mask, L2 normalisation

Sizes: by default TINY configs (hidden 16, 2 layers, 2 heads, FFN 32, vocab 128-131, images
32x32 with patch 8): the real architectures at a size that keeps the committed corpus small
(the tree that travels to the GPU machine is capped). --full uses the real base configs
(BERT-base with its 30522 vocabulary, GPT-2 small with 50257, ViT-base/16 at 224, CLIP
ViT-B/32, Llama at hidden 1024 / 8 layers with a 32000 vocabulary): for benchmarks, never to
commit. Inputs: batch 2, seq 16, row 1's last 5 tokens padded (attention_mask 0); images 2x3xIxI.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_real import run_exports, save_pb  # noqa: E402  (one writer of the .pb layout)

BATCH, SEQ, PAD = 2, 16, 5
KV_DATA = [(5, 1), (4, 3)]  # (past, new tokens) per test data set of the *_kv exports
KV_TRACE = (4, 3)           # traced at these so no dim is specialised to 1
# hidden, layers, heads, FFN, vocabularies (odd on purpose: GPT-2's 50257 is odd too), image, patch
TINY = dict(hidden=16, layers=2, heads=2, ffn=32, bert_vocab=128, roberta_vocab=128, gpt2_vocab=131,
            llama_vocab=128, image=32, patch=8, labels=3, tokens=5, positions=40)
FULL = dict(hidden=768, layers=12, heads=12, ffn=3072, bert_vocab=30522, roberta_vocab=50265, gpt2_vocab=50257,
            llama_vocab=32000, image=224, patch=16, labels=3, tokens=5, positions=1024)
SIZE = dict(TINY)
FULL_RUN = False
KEEP_METADATA = False
HEADS = ["bert_mlm", "bert_seqcls", "bert_tokcls", "bert_qa", "roberta_mlm", "roberta_seqcls", "roberta_tokcls",
         "roberta_qa", "gpt2_lm", "gpt2_lm_kv", "llama_lm", "llama_lm_kv", "vit_imgcls", "clip", "sbert_mean"]
VARIANTS = [(17, "ts"), (18, "dynamo")]


def vocab_of(arch):
    return SIZE[f"{arch}_vocab"] if f"{arch}_vocab" in SIZE else SIZE["bert_vocab"]


def text_inputs(torch, vocab, with_type_ids=False):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (BATCH, SEQ), generator=g)
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    mask[1, SEQ - PAD:] = 0
    d = {"input_ids": ids, "attention_mask": mask}
    if with_type_ids:
        d["token_type_ids"] = torch.zeros(BATCH, SEQ, dtype=torch.int64)
    return d


def image_inputs(torch, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(BATCH, 3, SIZE["image"], SIZE["image"], generator=g)


def config(arch, tf):
    s = SIZE
    eager = dict(attn_implementation="eager")
    if arch == "bert":
        if FULL_RUN:
            return tf.BertConfig(**eager)
        return tf.BertConfig(vocab_size=s["bert_vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                             num_attention_heads=s["heads"], intermediate_size=s["ffn"],
                             max_position_embeddings=s["positions"], **eager)
    if arch == "roberta":
        if FULL_RUN:
            return tf.RobertaConfig(vocab_size=50265, max_position_embeddings=514, **eager)
        return tf.RobertaConfig(vocab_size=s["roberta_vocab"], hidden_size=s["hidden"],
                                num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                                intermediate_size=s["ffn"], max_position_embeddings=s["positions"], **eager)
    if arch == "gpt2":
        if FULL_RUN:
            return tf.GPT2Config(**eager)
        return tf.GPT2Config(vocab_size=s["gpt2_vocab"], n_embd=s["hidden"], n_layer=s["layers"], n_head=s["heads"],
                             n_inner=s["ffn"], n_positions=s["positions"], **eager)
    if arch == "llama":
        h = 1024 if FULL_RUN else s["hidden"]
        return tf.LlamaConfig(vocab_size=s["llama_vocab"], hidden_size=h, num_hidden_layers=8 if FULL_RUN else 2,
                              num_attention_heads=16 if FULL_RUN else s["heads"],
                              num_key_value_heads=4 if FULL_RUN else 1,
                              intermediate_size=4 * h if FULL_RUN else s["ffn"],
                              max_position_embeddings=2048 if FULL_RUN else s["positions"], tie_word_embeddings=True,
                              **eager)
    if arch == "vit":
        if FULL_RUN:
            return tf.ViTConfig(num_labels=s["labels"], **eager)
        return tf.ViTConfig(hidden_size=s["hidden"], num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                            intermediate_size=s["ffn"], image_size=s["image"], patch_size=s["patch"],
                            num_labels=s["labels"], **eager)
    if arch == "clip":
        if FULL_RUN:
            return tf.CLIPConfig(**eager)
        text = dict(vocab_size=s["bert_vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                    num_attention_heads=s["heads"], intermediate_size=s["ffn"], max_position_embeddings=s["positions"])
        vision = dict(hidden_size=s["hidden"], num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                      intermediate_size=s["ffn"], image_size=s["image"], patch_size=s["patch"])
        return tf.CLIPConfig(text_config=text, vision_config=vision, projection_dim=s["hidden"], **eager)
    raise KeyError(arch)


def build(name, torch, tf):
    """(module taking the inputs positionally and returning a tuple, inputs dict,
    output names, {input or output name: {axis: dim name}})."""
    nn = torch.nn
    arch, _, head = name.partition("_")
    text_dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                 "token_type_ids": {0: "batch", 1: "seq"}}

    class Heads(nn.Module):
        """Calls the HF model by keyword and returns the named outputs as a tuple."""

        def __init__(self, m, in_names, out_keys):
            super().__init__()
            self.m, self.in_names, self.out_keys = m, in_names, out_keys

        def forward(self, *a):
            out = self.m(**dict(zip(self.in_names, a)))
            return tuple(out[k] for k in self.out_keys)

    if arch in ("bert", "roberta") and head in ("mlm", "seqcls", "tokcls", "qa"):
        cfg = config(arch, tf)
        cls = {"mlm": "ForMaskedLM", "seqcls": "ForSequenceClassification", "tokcls": "ForTokenClassification",
               "qa": "ForQuestionAnswering"}[head]
        if head == "seqcls":
            cfg.num_labels = SIZE["labels"]
        if head == "tokcls":
            cfg.num_labels = SIZE["tokens"]
        model = getattr(tf, ("Bert" if arch == "bert" else "Roberta") + cls)(cfg)
        inputs = text_inputs(torch, vocab_of(arch), with_type_ids=arch == "bert")
        outs = ["start_logits", "end_logits"] if head == "qa" else ["logits"]
        dims = dict(text_dims)
        for o in outs:
            dims[o] = {0: "batch"} if head == "seqcls" else {0: "batch", 1: "seq"}
        return Heads(model, list(inputs), outs), inputs, outs, dims
    if arch in ("gpt2", "llama") and head == "lm":
        model = (tf.GPT2LMHeadModel if arch == "gpt2" else tf.LlamaForCausalLM)(config(arch, tf))
        inputs = text_inputs(torch, vocab_of(arch))
        dims = dict(text_dims, logits={0: "batch", 1: "seq"})
        return Heads(model, list(inputs), ["logits"]), inputs, ["logits"], dims
    if arch == "vit" and head == "imgcls":
        model = tf.ViTForImageClassification(config("vit", tf))
        return Heads(model, ["pixel_values"], ["logits"]), {"pixel_values": image_inputs(torch)}, ["logits"], \
            {"pixel_values": {0: "batch"}, "logits": {0: "batch"}}
    if name == "clip":
        model = tf.CLIPModel(config("clip", tf))
        inputs = dict(text_inputs(torch, SIZE["bert_vocab"]), pixel_values=image_inputs(torch, 1))
        outs = ["logits_per_image", "logits_per_text", "text_embeds", "image_embeds"]
        dims = {"input_ids": {0: "text_batch", 1: "seq"}, "attention_mask": {0: "text_batch", 1: "seq"},
                "pixel_values": {0: "image_batch"}, "logits_per_image": {0: "image_batch", 1: "text_batch"},
                "logits_per_text": {0: "text_batch", 1: "image_batch"}, "text_embeds": {0: "text_batch"},
                "image_embeds": {0: "image_batch"}}
        return Heads(model, list(inputs), outs), inputs, outs, dims
    if name == "sbert_mean":
        class MeanPooled(nn.Module):
            """sentence-transformers' Transformer + Pooling(mean) + Normalize modules."""

            def __init__(self):
                super().__init__()
                self.m = tf.BertModel(config("bert", tf), add_pooling_layer=False)

            def forward(self, *a):  # positional, like Heads (one dynamic_shapes layout)
                input_ids, attention_mask, token_type_ids = a
                tok = self.m(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state
                w = attention_mask.unsqueeze(-1).to(tok.dtype)
                pooled = (tok * w).sum(1) / torch.clamp(w.sum(1), min=1e-9)
                return (torch.nn.functional.normalize(pooled, p=2, dim=1),)

        inputs = text_inputs(torch, vocab_of("bert"), with_type_ids=True)
        return MeanPooled(), inputs, ["sentence_embedding"], dict(text_dims, sentence_embedding={0: "batch"})
    raise KeyError(name)


def check_tied(model, name):
    """The causal LMs and MLMs must share one weight between the embedding and the head."""
    getter = getattr(model, "get_output_embeddings", None)
    head = getter() if getter else None
    if head is not None and head.weight is not model.get_input_embeddings().weight:
        raise RuntimeError(f"{name}: lm_head/decoder weight is not tied to the input embedding")


def export_graph(pm, args, names, outs, dims, path, opset, exporter, torch):
    big = FULL_RUN and sum(p.numel() for p in pm.parameters()) * 4 > (3 << 29)
    with torch.no_grad():
        if exporter == "ts":
            dyn = {k: v for k, v in dims.items() if k in names or k in outs}
            torch.onnx.export(pm, args, path, input_names=names, output_names=outs, opset_version=opset,
                              dynamic_axes=dyn, dynamo=False)
        else:
            made = {}

            def dim(n):
                # A sequence dim ranges up to the position table: beyond it the model cannot run,
                # and a larger bound makes the exporter write Min(positions, seq) dims.
                top = 4096 if "batch" in n else SIZE["positions"]
                return made.setdefault(n, torch.export.Dim(n, min=1 if "batch" in n else 2, max=top))
            ds = (tuple({ax: dim(n) for ax, n in dims[k].items()} for k in names),)
            prog = torch.onnx.export(pm, args, dynamic_shapes=ds, input_names=names, output_names=outs,
                                     opset_version=opset, dynamo=True, external_data=big)
            prog.save(path, external_data=big)


def strip_metadata(path):
    """The dynamo exporter writes each node's Python stack trace, FX node and module path
    as metadata_props (three quarters of a tiny model's bytes); they carry no semantics,
    so they go (--keep-metadata keeps them)."""
    import onnx
    if KEEP_METADATA:
        return
    m = onnx.load(path, load_external_data=False)
    if not any(n.metadata_props or n.doc_string for n in m.graph.node):
        return
    for n in m.graph.node:
        del n.metadata_props[:]
        n.doc_string = ""
    onnx.save(m, path)


def write_data(d, k, m, feeds, outs):
    td = os.path.join(d, f"test_data_set_{k}")
    os.makedirs(td, exist_ok=True)
    for i, x in enumerate(feeds):
        save_pb(np.asarray(x), os.path.join(td, f"input_{i}.pb"), m.graph.input[i].name)
    for i, o in enumerate(outs):
        save_pb(o, os.path.join(td, f"output_{i}.pb"), m.graph.output[i].name)


def ort_session(path):
    import onnxruntime as ort
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def export_one(name, opset, exporter, out_root, torch, tf):
    import onnx
    if name.endswith("_kv"):
        return export_kv(name, opset, exporter, out_root, torch, tf)
    model, inputs, outs, dims = build(name, torch, tf)
    model.eval()
    if name.endswith("_mlm") or name.endswith("_lm"):
        check_tied(model.m, name)
    full = f"{name}_op{opset}_{exporter}"
    d = os.path.join(out_root, full)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    names = list(inputs)
    args = tuple(inputs[k] for k in names)
    export_graph(model, args, names, outs, dims, path, opset, exporter, torch)
    strip_metadata(path)
    m = onnx.load(path, load_external_data=False)
    sess = ort_session(path)
    feeds = [inputs[k].numpy() for k in names]
    got = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), feeds)})
    write_data(d, 0, m, feeds, got)
    with torch.no_grad():
        ref = model(*args)
    err = max(float(np.abs(r.numpy() - o).max()) for r, o in zip(ref, got))
    return full, len(m.graph.node), err, len(got)


def export_kv(name, opset, exporter, out_root, torch, tf):
    """One decoding step of the causal LM with a KV cache: logits + present out."""
    import onnx
    from export_kv_cache import cache_tensors, make_cache
    arch = name.split("_")[0]
    cfg = config(arch, tf)
    model = (tf.GPT2LMHeadModel if arch == "gpt2" else tf.LlamaForCausalLM)(cfg).eval()
    check_tied(model, name)
    layers = cfg.num_hidden_layers
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = cfg.hidden_size // heads
    vocab = cfg.vocab_size

    class Step(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, *past):
            out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                         past_key_values=make_cache(tf, past, layers), use_cache=True)
            return (out.logits, *cache_tensors(out.past_key_values, layers))

    def step_inputs(past, seq, seed):
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(3, vocab, (BATCH, seq), generator=g)
        mask = torch.ones(BATCH, past + seq, dtype=torch.int64)
        mask[1, :2] = 0  # row 1 left-padded in the past
        flat = [torch.randn(BATCH, kv_heads, past, head_dim, generator=g) for _ in range(2 * layers)]
        return [ids, mask] + flat

    step = Step(model)
    past_names = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present_names = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    in_names = ["input_ids", "attention_mask"] + past_names
    out_names = ["logits"] + present_names
    full = f"{name}_op{opset}_{exporter}"
    d = os.path.join(out_root, full)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    trace = step_inputs(*KV_TRACE, seed=1)
    data = [step_inputs(past, seq, seed=10 + k) for k, (past, seq) in enumerate(KV_DATA)]
    with torch.no_grad():  # PyTorch's outputs before the export traces the module
        refs = [[r.numpy().copy() for r in step(*inputs)] for inputs in data]
    with torch.no_grad():
        if exporter == "ts":
            total = "past_sequence_length + sequence_length"
            dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"}, "attention_mask": {0: "batch_size", 1: total},
                   "logits": {0: "batch_size", 1: "sequence_length"}}
            dyn.update({n: {0: "batch_size", 2: "past_sequence_length"} for n in past_names})
            dyn.update({n: {0: "batch_size", 2: total} for n in present_names})
            torch.onnx.export(step, tuple(trace), path, input_names=in_names, output_names=out_names,
                              opset_version=opset, dynamic_axes=dyn, dynamo=False)
        else:
            # One batch dim shared by every input (with AUTO each input got its own symbol and the
            # mask's view(batch, -1) came out as ((s43*s53)//s56)); the lengths AUTO, which
            # lets the exporter find mask length = past + new itself.
            auto, batch = torch.export.Dim.AUTO, torch.export.Dim("batch", min=1, max=64)
            ds = ({0: batch, 1: auto}, {0: batch, 1: auto}, tuple({0: batch, 2: auto} for _ in past_names))
            prog = torch.onnx.export(step, tuple(trace), dynamic_shapes=ds, input_names=in_names,
                                     output_names=out_names, opset_version=opset, dynamo=True, external_data=False)
            prog.save(path)
    strip_metadata(path)
    m = onnx.load(path, load_external_data=False)
    sess = ort_session(path)
    worst = 0.0
    for k, inputs in enumerate(data):
        feeds = [x.numpy() for x in inputs]
        got = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), feeds)})
        write_data(d, k, m, feeds, got)
        worst = max(worst, max(float(np.abs(r - o).max()) for r, o in zip(refs[k], got)))
    return full, len(m.graph.node), worst, len(out_names)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models/exported")
    ap.add_argument("--only", default="", help="comma-separated heads (default: all): " + ",".join(HEADS))
    ap.add_argument("--variants", default="", help="comma-separated like 17ts,18dynamo (default: both)")
    ap.add_argument("--full", action="store_true",
                    help="real base configs and vocabularies (hundreds of MB each): benchmarks only, never commit")
    ap.add_argument("--keep-metadata", action="store_true",
                    help="keep the dynamo exporter's per-node metadata_props (stack traces)")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(HEADS))
        return 0
    global FULL_RUN, KEEP_METADATA
    KEEP_METADATA = a.keep_metadata
    if a.full:
        FULL_RUN = True
        SIZE.update(FULL)
        if os.path.abspath(a.out).startswith(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))):
            sys.exit("export_heads: --full models must not go into the repository (use e.g. --out /tmp/heads)")
    import torch
    import transformers as tf
    heads = a.only.split(",") if a.only else HEADS
    unknown = [h for h in heads if h not in HEADS]
    if unknown:
        sys.exit(f"export_heads: unknown head(s) {unknown}; known: {','.join(HEADS)}")
    want = set(a.variants.split(",")) if a.variants else None
    jobs = [(h, op, ex) for h in heads for op, ex in VARIANTS if want is None or f"{op}{ex}" in want]
    failures = run_exports(jobs, lambda h, op, ex: export_one(h, op, ex, a.out, torch, tf), torch)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
