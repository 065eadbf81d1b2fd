"""Multi-query attention of real Hugging Face exports (models/exported):
Falcon (multi_query, one kv head gathered from a fused QKV projection) and GPT-BigCode
(multi_query, Split of Unsqueeze(qkv, 1)) must fuse one fuseopt.Attention per layer with
kv_num_heads = 1; Gemma-2 (tanh logit soft-capping, which Attention cannot express) must
stay unfused with the soft-capping named in the report. Every optimized model passes
onnx.checker, reproduces test_data_set_0 in ONNX Runtime (through the function bodies)
and `fuserun --backend cpu --check` (fuseopt's kernels).

Fails when these bundled model folders are missing."""
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

RTOL = ATOL = 1e-4
MQA = ("falcon_", "bigcode_")
SOFTCAP = ("gemma2_",)


def check(args, d, tmp):
    import onnx
    name = os.path.basename(d)
    src = os.path.join(d, "model.onnx")
    out = os.path.join(tmp, name + ".onnx")
    report = os.path.join(tmp, name + ".json")
    r = lib.run_fuseopt(args.bin, src, out, "-q", "--report", report)
    if r.returncode != 0:
        return [f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()}"]
    fails = []
    orig = onnx.load(src, load_external_data=False)
    model = onnx.load(out)
    layers = sum(1 for n in orig.graph.node if n.op_type == "Softmax")
    attn = [n for n in model.graph.node if n.domain == "fuseopt" and n.op_type == "Attention"]
    if name.startswith(MQA):
        if len(attn) != layers:
            fails.append(f"{name}: {len(attn)} Attention nodes for {layers} layers")
        for n in attn:
            a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
            if a.get("kv_num_heads") != 1 or a.get("num_heads", 0) <= 1:
                fails.append(f"{name}: {n.name} has num_heads={a.get('num_heads')} kv_num_heads={a.get('kv_num_heads')}")
    else:
        if attn:
            fails.append(f"{name}: {len(attn)} Attention nodes although the scores are soft-capped")
        with open(report) as f:
            pats = [p for p in json.load(f)["patterns"] if p["name"] == "Attention"]
        reasons = [x for p in pats for x in p.get("reasons", [])]
        capped = [x for x in reasons if "Tanh" in x and "non-linearly" in x]
        if len(capped) != layers:
            fails.append(f"{name}: {len(capped)} soft-capping rejections for {layers} layers: {reasons}")
    try:
        onnx.checker.check_model(out, full_check=True)
    except Exception as e:  # noqa: BLE001
        fails.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
    inputs, refs = lib.load_test_data(d)
    try:
        for i, (g, w) in enumerate(zip(lib.run_ort(out, inputs), refs)):
            why = lib.compare(g, w, ATOL, RTOL)
            if why:
                fails.append(f"{name}: onnxruntime output {i}: {why}")
    except Exception as e:  # noqa: BLE001
        fails.append(f"{name}: onnxruntime failed: {str(e).splitlines()[0]}")
    fr = subprocess.run([os.path.join(args.bin, "fuserun"), out, "--backend", "cpu", "--check",
                         os.path.join(d, "test_data_set_0")], capture_output=True, text=True, timeout=600)
    if fr.returncode != 0:
        tail = (fr.stdout + fr.stderr).strip().splitlines()[-3:]
        fails.append(f"{name}: fuserun --backend cpu --check exit {fr.returncode}: {' | '.join(tail)}")
    print(f"{'ok' if not fails else 'FAIL'} {name}: layers={layers} attention={len(attn)}")
    return fails


def main():
    args = lib.parse_args()
    lib.require("onnx", "onnxruntime", "numpy")
    dirs = []
    for path in sorted(glob.glob(os.path.join(args.src, "models/exported/*/model.onnx"))):
        d = os.path.dirname(path)
        name = os.path.basename(d)
        if name.startswith(MQA + SOFTCAP) and args.k in name and os.path.isdir(os.path.join(d, "test_data_set_0")):
            dirs.append(d)
    if not dirs:
        print("FAIL: no Falcon / GPT-BigCode / Gemma-2 exports under models/exported")
        return 1
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in dirs:
            fails += check(args, d, tmp)
    for f in fails:
        print("FAIL " + f)
    print(f"{len(dirs)} models, {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
