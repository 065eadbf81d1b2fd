"""KV-cache decoders (models/synthetic/kv_*, written by models/make_synthetic.py, and any
models/exported/*kv* export): past_key/past_value concatenated with the new keys/values
must become ONE fuseopt.Attention with past inputs and present outputs (no Softmax, no
cache Concat left; the model's present outputs are the op's outputs 1 and 2). Then, for
every test_data_set_N (decode S_q = 1 and S_q > 1, batch 2 with padding):
  - ONNX Runtime runs the optimized model (the Attention function body, `_past` overload)
    to the reference, every output (hidden state and each present), fp32 1e-4;
  - `fuserun --backend cpu --check` (fuseopt's CPU kernel) passes, and where a GPU is
    usable `fuserun --backend cuda --check` at fp32 and fp16, with and without the opt-in
    split-KV decode kernel (FUSEOPT_FLASH_DECODE=1).
Encoder-decoder decoder steps (models/export_seq2seq_kv.py: BART, T5, Whisper) fuse the
self-attention with past/present and the cross-attention over the encoder cache without.
The transformers-5 style Llama mask (kv_idx <= cache_position, GatherND of
attention_mask) must become causal=1 + `mask` over the total length, no attn_bias; the
transformers-4 GPT-2 causal buffer sliced at the cache offset must become causal=1."""
import glob
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

# model -> attributes / inputs the fused op must have
EXPECT = {
    "kv_llama_gqa": {"causal": 1, "mask": "attention_mask", "attn_bias": False, "kv_num_heads": 2},
    "kv_llama_total": {"causal": 1, "mask": "attention_mask", "attn_bias": False, "kv_num_heads": 2},
    "kv_gpt2_mha": {"causal": 1, "kv_num_heads": 2},  # tril buffer sliced [S_kv - S_q : S_kv, :S_kv]
    "kv_mqa": {"kv_num_heads": 1},
    # Opset 23 (ONNX's Attention op): the cache Concat and repeat_kv traced, the sdpa bool mask proven.
    "gpt2_kv_op23_dynamo_sdpa": {"causal": 1, "attn_bias": False},
    # Optimum's exports (models/export_optimum.py, transformers 4.57's SDPA path): the mask sliced to
    # the repeated keys' length (mask[..., :key.shape[-2]]) and that Shape read after repeat_kv.
    "optimum_llama_kv": {"causal": 1, "mask": "attention_mask", "attn_bias": False, "kv_num_heads": 2},
    "optimum_qwen2_kv": {"causal": 1, "mask": "attention_mask", "attn_bias": False, "kv_num_heads": 2},
    "optimum_phi3_kv": {"causal": 1, "mask": "attention_mask", "attn_bias": False, "kv_num_heads": 2},
    "optimum_gpt2_kv": {"causal": 1, "attn_bias": False},
    # Sliding windows (kv_idx > q_idx - W, transformers' sliding_window_overlay): causal + mask +
    # window = W instead of the whole [B, 1, S_q, S_kv] mask as attn_bias. Gemma-2 alternates
    # windowed and full layers: the set of windows its layers carry.
    "optimum_mistral_kv": {"causal": 1, "mask": "attention_mask", "attn_bias": False, "kv_num_heads": 2,
                           "windows": {4096}},
    "mistral_kv_op17_ts": {"causal": 1, "mask": "attention_mask", "attn_bias": False, "kv_num_heads": 2,
                           "windows": {4096}},
    "gemma2_kv_op17_ts": {"causal": 1, "mask": "attention_mask", "attn_bias": False, "windows": {0, 4096}},
    "gemma2_kv_op18_dynamo": {"causal": 1, "attn_bias": False, "windows": {0, 4096}},
}


# fuserun --backend cuda (fp32 1e-4, fp16 1e-2) runs too where a GPU is usable.
CUDA = {"usable": True}


def read_tensor(path):
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def check(args, d, tmp, onnx):
    name = os.path.basename(d)
    out = os.path.join(tmp, name + ".opt.onnx")
    r = lib.run_fuseopt(args.bin, os.path.join(d, "model.onnx"), out, "-q")
    if r.returncode:
        return [f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()[:300]}"]
    m = onnx.load(out)
    orig = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
    # Attention blocks: Softmax nodes, or from opset 23 the standard Attention nodes (the dynamo
    # exporter's scaled_dot_product_attention; passes/fusion/onnx_attention.cc).
    n_softmax = sum(1 for n in orig.graph.node
                    if n.op_type == "Softmax" or (n.op_type == "Attention" and n.domain in ("", "ai.onnx")))
    ops = [n.op_type for n in m.graph.node]
    fails = []
    attn = [n for n in m.graph.node if n.op_type == "Attention" and n.domain == "fuseopt"]
    outs = {o.name for o in m.graph.output}
    cache_concats = [n.name for n in m.graph.node if n.op_type == "Concat" and set(n.output) & outs]
    if len(attn) != n_softmax or "Softmax" in ops or cache_concats:
        fails.append(f"{name}: {len(attn)} Attention for {n_softmax} blocks, {ops.count('Softmax')} Softmax, "
                     f"cache Concats left {cache_concats}")
        return fails
    want = EXPECT.get(name, {})
    # Encoder-decoder steps (models/export_seq2seq_kv.py): each layer's cross-attention reads the
    # fixed encoder cache and has no past/present; every present output is still an Attention's.
    seq2seq = any(".encoder." in i.name for i in m.graph.input)
    with_past = [a for a in attn if len(a.input) > 6 and a.input[5] and a.input[6]]
    presents = [o for o in outs if o.startswith("present") and "key" in o]
    if seq2seq and len(with_past) != len(presents):
        fails.append(f"{name}: {len(with_past)} Attention with past for {len(presents)} present keys")
    if "windows" in want:
        got_windows = {next((onnx.helper.get_attribute_value(x) for x in a.attribute if x.name == "window"), 0)
                       for a in attn}
        if got_windows != want["windows"]:
            fails.append(f"{name}: windows {sorted(got_windows)}, want {sorted(want['windows'])}")
    for a in attn:
        ins = list(a.input) + [""] * (7 - len(a.input))
        if not (ins[5] and ins[6]):
            if not seq2seq:
                fails.append(f"{name}: {a.name} has no past inputs: {list(a.input)}")
            continue
        if len(a.output) != 3 or not {a.output[1], a.output[2]} <= outs:
            fails.append(f"{name}: {a.name}: the present outputs are not the op's outputs 1, 2: {list(a.output)}")
        attrs = {x.name: onnx.helper.get_attribute_value(x) for x in a.attribute}
        if "causal" in want and attrs.get("causal", 0) != want["causal"]:
            fails.append(f"{name}: causal={attrs.get('causal', 0)}, want {want['causal']}")
        if "mask" in want and ins[3] != want["mask"]:
            fails.append(f"{name}: mask input '{ins[3]}', want '{want['mask']}'")
        if want.get("attn_bias") is False and ins[4]:
            fails.append(f"{name}: attn_bias '{ins[4]}' left (the mask should be causal + mask)")
        if "kv_num_heads" in want and attrs.get("kv_num_heads") != want["kv_num_heads"]:
            fails.append(f"{name}: kv_num_heads {attrs.get('kv_num_heads')}, want {want['kv_num_heads']}")
    try:
        onnx.checker.check_model(out, full_check=True)
    except Exception as e:  # noqa: BLE001
        fails.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
    for data in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
        tag = f"{name}/{os.path.basename(data)}"
        inputs = [read_tensor(p) for p in lib.data_files(data, "input")]
        refs = [read_tensor(p) for p in lib.data_files(data, "output")]
        try:
            got = lib.run_ort(out, inputs)
            for i, (g, w) in enumerate(zip(got, refs)):
                why = lib.compare(g, w, 1e-4, 1e-4)
                if why:
                    fails.append(f"{tag}: onnxruntime output {i}: {why}")
        except Exception as e:  # noqa: BLE001
            fails.append(f"{tag}: onnxruntime failed: {str(e).splitlines()[0]}")
        # CUDA through every decode path (S_q = 1 without attn_bias): the prefill kernels
        # (FUSEOPT_FLASH_DECODE=0), the one-launch append + attention kernel (the default), the
        # two-launch split-KV kernels (FUSEOPT_DECODE_APPEND=0).
        paths = {"0": {"FUSEOPT_FLASH_DECODE": "0"}, "1": {"FUSEOPT_FLASH_DECODE": "1"},
                 "1 FUSEOPT_DECODE_APPEND=0": {"FUSEOPT_FLASH_DECODE": "1", "FUSEOPT_DECODE_APPEND": "0"}}
        runs = [("cpu", "fp32", "0")] + ([("cuda", p, fd) for fd in paths for p in ("fp32", "fp16")]
                                         if CUDA["usable"] else [])
        for backend, prec, fd in runs:
            env = dict(os.environ, **paths[fd])
            fr = subprocess.run([os.path.join(args.bin, "fuserun"), out, "--backend", backend, "--precision", prec,
                                 "--check", data], capture_output=True, text=True, timeout=600, env=env)
            text = (fr.stdout + fr.stderr).strip()
            # No GPU here, or a -DFUSEOPT_CUDA=OFF build: the CUDA runs are skipped.
            if backend == "cuda" and ("no usable CUDA device" in text or "this build has no cuda backend" in text):
                CUDA["usable"] = False
                break
            if fr.returncode:
                tail = text.splitlines()[-3:]
                fails.append(f"{tag}: FUSEOPT_FLASH_DECODE={fd} fuserun --backend {backend} --precision {prec} --check "
                             f"exit {fr.returncode}: "
                             f"{' | '.join(tail)}")
    a0 = (with_past or attn)[0]
    ins = list(a0.input) + [""] * (7 - len(a0.input))
    causal = next((onnx.helper.get_attribute_value(x) for x in a0.attribute if x.name == "causal"), 0)
    print(("ok   " if not fails else "FAIL ") + f"{name}: {len(attn)} Attention, {len(ops)} nodes, causal={causal}, "
          f"mask={ins[3] or '-'}, attn_bias={'yes' if ins[4] else '-'}")
    return fails


def main():
    args = lib.parse_args()
    onnx, _, _ = lib.require("onnx", "onnxruntime", "numpy")
    dirs = [d for d in lib.model_dirs(args.src, args.k) if os.path.basename(d).startswith("kv_") or "_kv" in d]
    if not dirs:
        print("FAIL: no KV-cache models (models/synthetic/kv_*) found")
        return 1
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in dirs:
            failures += check(args, d, tmp, onnx)
    for f in failures:
        print("FAIL " + f)
    print(f"{len(dirs)} models, {len(failures)} failures" + ("" if CUDA["usable"] else " (no usable GPU: CUDA runs skipped)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
