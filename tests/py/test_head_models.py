#!/usr/bin/env python3
"""Models with their task heads (issue 15, part 2; models/export_heads.py): every
models/exported/<arch>_<head>_op<opset>_<exporter> export, fused by fuseopt, against the
bare model of its family in models/exported (same exporter and opset where there is one):
  - every layer fuses as in the bare model: as many Attention ops as the original has
    Softmax nodes and as the bare model has, the same RotaryEmbedding / GatedMatMul counts;
  - the GEMMs (fused ops + MatMul/Gemm on a constant 2-D weight) are the bare model's plus
    the head's own (pooler, classifier, MLM transform + decoder, lm_head, projections), at
    least as many of them fused, and no more left plain than the head allows (CLIP's
    bias-free text projection through the TorchScript exporter);
  - nothing left to fold: no Softmax, ReduceMean, GELU after a GEMM, Tanh outside a
    soft-cap (the pooler's tanh is FusedMatMul's activation), Pow outside an
    L2 normalisation (CLIP's sum(x**2)**0.5, cheap [B, D] ops that stay as they are);
  - tied heads (masked-LM decoders, causal-LM lm_heads) read the embedding table itself with
    transB = 1: the exporter's transposed copy is gone (one [V, H] table in the model);
  - ONNX Runtime on the fused model and `fuserun --backend cpu --check` reproduce EVERY output
    of every test_data_set_N (fp32, 1e-4), and fuserun prints one `ok` line per output.
Invoked by ctest as: test_head_models.py --bin <build>/bin --src <repo>."""
import glob
import os
import re
import subprocess
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

# head model prefix -> bare family (one or several models whose counts add up),
# GEMMs the head adds, FusedMatMul(tanh) expected, tied embedding, plain GEMMs allowed.
HEADS = {
    "bert_mlm": dict(bare=["bert"], gemms=2, tied=True),
    "roberta_mlm": dict(bare=["roberta"], gemms=2, tied=True),
    "bert_seqcls": dict(bare=["bert"], gemms=2, tanh=1),
    "roberta_seqcls": dict(bare=["roberta"], gemms=2, tanh=1),
    "bert_tokcls": dict(bare=["bert"], gemms=1),
    "roberta_tokcls": dict(bare=["roberta"], gemms=1),
    "bert_qa": dict(bare=["bert"], gemms=1),
    "roberta_qa": dict(bare=["roberta"], gemms=1),
    "gpt2_lm_kv": dict(bare=["gpt2_kv"], gemms=1, tied=True),
    "gpt2_lm": dict(bare=["gpt2"], gemms=1, tied=True),
    "llama_lm_kv": dict(bare=["llama_kv"], gemms=1, tied=True),
    "llama_lm": dict(bare=["llama"], gemms=1, tied=True),
    "vit_imgcls": dict(bare=["vit"], gemms=1),
    "clip": dict(bare=["cliptext", "clipvision"], gemms=2, plain=1),
    "sbert_mean": dict(bare=["bert"], gemms=0),
}
NAME = re.compile(r"^(?P<head>.+)_op(?P<opset>\d+)_(?P<exporter>ts|dynamo)$")
FUSED_GEMMS = {"FusedMatMul", "LayerNormLinear", "FusedMatMulLayerNorm", "GatedMatMul"}


def head_of(name):
    m = NAME.match(name)
    if not m or m["head"] not in HEADS:
        return None
    return m["head"], f"_op{m['opset']}_{m['exporter']}"


def bare_dir(src, family, variant):
    """The bare export of `family` with the same variant, else any variant of it."""
    exact = os.path.join(src, "models", "exported", family + variant)
    if os.path.isfile(os.path.join(exact, "model.onnx")):
        return exact
    others = sorted(d for d in glob.glob(os.path.join(src, "models", "exported", family + "_op*"))
                    if NAME.match(os.path.basename(d)) and NAME.match(os.path.basename(d))["head"] == family)
    return others[0] if others else None


def gemm_counts(model):
    inits = {t.name: t for t in model.graph.initializer}
    fused = plain = 0
    for n in model.graph.node:
        if n.domain == "fuseopt" and n.op_type in FUSED_GEMMS:
            fused += 1
        elif n.op_type in ("MatMul", "Gemm") and n.input[1] in inits and len(inits[n.input[1]].dims) == 2:
            plain += 1
    return fused, plain


def fuse(args, src, out):
    r = lib.run_fuseopt(args.bin, src, out, "-q")
    return r.stderr.strip() if r.returncode else None


def read(path, onnx):
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def check_tied(name, model, onnx):
    """One [V, H] embedding table and no transposed copy; the head GEMM reads it with transB=1."""
    inits = {t.name: t for t in model.graph.initializer}
    # The lookups: Gathers of a [V, H] table, or fuseopt.EmbedLayerNorm's tables (inputs 2, 4, 6).
    tables = [n.input[0] for n in model.graph.node if n.op_type == "Gather" and n.input[0] in inits]
    tables += [t for n in model.graph.node if n.domain == "fuseopt" and n.op_type == "EmbedLayerNorm"
               for t in list(n.input)[2::2] if t in inits]
    tables = [t for t in tables if len(inits[t].dims) == 2]
    if not tables:
        return [f"{name}: no embedding Gather found"]
    table = max((inits[t] for t in tables), key=lambda t: t.dims[0])
    v, h = table.dims
    fails = []
    copies = [t.name for t in model.graph.initializer if t.name != table.name and list(t.dims) in ([h, v], [v, h])]
    if copies:
        fails.append(f"{name}: the tied head's weight is stored again: {copies} besides '{table.name}' {[v, h]}")
    readers = [n for n in model.graph.node if n.domain == "fuseopt" and n.op_type != "EmbedLayerNorm"
               and table.name in list(n.input)]
    if not readers:
        fails.append(f"{name}: no fused GEMM reads the embedding table '{table.name}'")
    for n in readers:
        tb = next((onnx.helper.get_attribute_value(a) for a in n.attribute if a.name == "transB"), 0)
        if tb != 1:
            fails.append(f"{name}: {n.op_type} '{n.name}' reads the table with transB={tb}")
    return fails


def check_one(args, model_dir, tmp):
    import onnx
    name = os.path.basename(model_dir)
    hv = head_of(name)
    if hv is None:
        return []
    head, variant = hv
    spec = HEADS[head]
    out = os.path.join(tmp, name + ".onnx")
    err = fuse(args, os.path.join(model_dir, "model.onnx"), out)
    if err:
        return [f"{name}: fuseopt failed: {err}"]
    orig = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    model = onnx.load(out)
    ops = Counter(n.op_type for n in model.graph.node)
    fails = []
    # The bare family, fused the same way.
    bare_ops, bare_fused, bare_plain, bares = Counter(), 0, 0, []
    for fam in spec["bare"]:
        d = bare_dir(args.src, fam, variant)
        if d is None:
            fails.append(f"{name}: no bare '{fam}' export in models/exported to compare with")
            continue
        bares.append(os.path.basename(d))
        bout = os.path.join(tmp, f"{name}.bare.{os.path.basename(d)}.onnx")
        berr = fuse(args, os.path.join(d, "model.onnx"), bout)
        if berr:
            fails.append(f"{name}: fuseopt failed on the bare {d}: {berr}")
            continue
        bm = onnx.load(bout)
        bare_ops += Counter(n.op_type for n in bm.graph.node)
        f, p = gemm_counts(bm)
        bare_fused += f
        bare_plain += p
    if fails:
        return fails
    layers = sum(1 for n in orig.graph.node if n.op_type == "Softmax")
    if ops["Attention"] != layers or ops["Attention"] != bare_ops["Attention"]:
        fails.append(f"{name}: {ops['Attention']} Attention for {layers} Softmax (bare {bares}: "
                     f"{bare_ops['Attention']})")
    for op in ("RotaryEmbedding", "GatedMatMul"):
        if ops[op] != bare_ops[op]:
            fails.append(f"{name}: {ops[op]} {op}, the bare model has {bare_ops[op]}")
    fused, plain = gemm_counts(model)
    want_total = bare_fused + bare_plain + spec["gemms"]
    if fused + plain != want_total:
        fails.append(f"{name}: {fused + plain} GEMMs ({fused} fused, {plain} plain), want the bare "
                     f"{bare_fused + bare_plain} + {spec['gemms']} of the head")
    if plain > bare_plain + spec.get("plain", 0):
        fails.append(f"{name}: {plain} GEMMs left plain, the bare model has {bare_plain}")
    for op in ("Softmax", "ReduceMean"):
        if ops[op]:
            fails.append(f"{name}: {ops[op]} {op} left")
    for op, node in lib.leftover_activations(model.graph):
        fails.append(f"{name}: {op} '{node}' left after a GEMM")
    for node in lib.pows_outside_l2_norm(model.graph):
        fails.append(f"{name}: Pow '{node}' left outside an L2 normalisation")
    tanh = sum(1 for n in model.graph.node if n.op_type == "FusedMatMul" and any(
        a.name == "activation" and onnx.helper.get_attribute_value(a) == b"tanh" for a in n.attribute))
    if tanh != spec.get("tanh", 0):
        fails.append(f"{name}: {tanh} FusedMatMul with activation tanh, want {spec.get('tanh', 0)}")
    if spec.get("tied"):
        fails += check_tied(name, model, onnx)
    # Every output of every data set: ONNX Runtime on the fused model (function bodies) and
    # fuserun's CPU kernels.
    outs = [o.name for o in model.graph.output]
    for data in sorted(glob.glob(os.path.join(model_dir, "test_data_set_*"))):
        tag = f"{name}/{os.path.basename(data)}"
        inputs = [read(p, onnx) for p in lib.data_files(data, "input")]
        refs = [read(p, onnx) for p in lib.data_files(data, "output")]
        if len(refs) != len(outs):
            fails.append(f"{tag}: {len(refs)} reference outputs for {len(outs)} graph outputs")
        try:
            got = lib.run_ort(out, inputs)
            for i, (g, w) in enumerate(zip(got, refs)):
                why = lib.compare(g, w, 1e-4, 1e-4)
                if why:
                    fails.append(f"{tag}: onnxruntime output {i} ({outs[i]}): {why}")
        except Exception as e:  # noqa: BLE001
            fails.append(f"{tag}: onnxruntime failed: {str(e).splitlines()[0]}")
        fr = subprocess.run([os.path.join(args.bin, "fuserun"), out, "--backend", "cpu", "--check", data],
                            capture_output=True, text=True, timeout=600)
        oks = [ln.split()[1].rstrip(":") for ln in fr.stdout.splitlines() if ln.strip().startswith("ok ")]
        if fr.returncode != 0 or oks != outs:
            tail = (fr.stdout + fr.stderr).strip().splitlines()[-3:]
            fails.append(f"{tag}: fuserun --backend cpu --check: rc {fr.returncode}, ok {oks} of {outs}: "
                         f"{' | '.join(tail)}")
    fused_ops = Counter(n.op_type for n in model.graph.node if n.domain == "fuseopt")
    print(("ok   " if not fails else "FAIL ") + f"{name} (bare {', '.join(bares)}): layers={layers} "
          f"gemms={fused}+{plain} plain, {len(outs)} outputs {dict(sorted(fused_ops.items()))}")
    return fails


def main():
    return lib.run_over_models(check_one, "onnx", "onnxruntime", "numpy",
                               select=lambda n: head_of(n) is not None)


if __name__ == "__main__":
    sys.exit(main())
