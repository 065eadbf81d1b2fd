"""Multi-query attention of real Hugging Face exports (models/exported):
Falcon (multi_query, one kv head gathered from a fused QKV projection) and GPT-BigCode
(multi_query, Split of Unsqueeze(qkv, 1)) must fuse one fuseopt.Attention per layer with
kv_num_heads = 1; Gemma-2 (tanh logit soft-capping cap*tanh(s/cap), GQA 2/1) must fuse one
fuseopt.Attention per layer with softcap = cap; its sliding-window layers (the window term
kv > q - W is not a causal or padding proof) keep their mask as attn_bias, the others get
causal = 1 + mask. Every optimized model passes
onnx.checker, reproduces test_data_set_0 in ONNX Runtime (through the function bodies)
and `fuserun --backend cpu --check` (fuseopt's kernels).

Fails when these bundled model folders are missing."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

RTOL = ATOL = 1e-4
# falcon_op*: the multi-query Falcon; falcon_kv_* (session 18) is the new decoder architecture
# with grouped kv heads, checked as a KV-cache decoder by test_attention_kv_cache.py.
MQA = ("falcon_op", "bigcode_")
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
        if len(attn) != layers:
            fails.append(f"{name}: {len(attn)} Attention nodes for {layers} soft-capped layers")
        for n in attn:
            a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
            if not a.get("softcap", 0) > 0:
                fails.append(f"{name}: {n.name} has no softcap attribute")
        if not any(len(n.input) > 3 and n.input[3] for n in attn):
            fails.append(f"{name}: no layer got a proven key-padding mask")
    try:
        onnx.checker.check_model(out, full_check=True)
    except Exception as e:  # noqa: BLE001
        fails.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
    fails += lib.ort_failures(name, out, d, ATOL, RTOL)
    fails += lib.fuserun_cpu_failures(args.bin, name, out, d)
    print(f"{'ok' if not fails else 'FAIL'} {name}: layers={layers} attention={len(attn)}")
    return fails


def main():
    return lib.run_over_models(check, "onnx", "onnxruntime", "numpy", select=lambda name: name.startswith(MQA + SOFTCAP))


if __name__ == "__main__":
    sys.exit(main())
