"""Exports in models/pytorch_reference (ONNX Runtime cannot run them; their reference outputs are
PyTorch's): opset-23 rotary decoders with ONNX's own Attention and RotaryEmbedding ops.
For each: fuseopt turns every ONNX Attention node into fuseopt.Attention (KV steps: with past
inputs and present outputs, transformers' mask proven into `mask` + causal except Mistral's
sliding window), and `fuserun --backend cpu --check` passes on every test_data_set_N for the
export itself and for the optimized model (every output: hidden state and each present)."""
import glob
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def check(args, d, tmp, onnx):
    name = os.path.basename(d)
    src = os.path.join(d, "model.onnx")
    out = os.path.join(tmp, name + ".opt.onnx")
    r = lib.run_fuseopt(args.bin, src, out, "-q")
    if r.returncode:
        return [f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()[:300]}"]
    orig = onnx.load(src)
    m = onnx.load(out)
    blocks = sum(1 for n in orig.graph.node if n.op_type == "Attention" and n.domain in ("", "ai.onnx"))
    fused = [n for n in m.graph.node if n.op_type == "Attention" and n.domain == "fuseopt"]
    left = [n.name for n in m.graph.node if n.op_type == "Attention" and n.domain in ("", "ai.onnx")]
    fails = []
    if not blocks or len(fused) != blocks or left:
        fails.append(f"{name}: {len(fused)} fuseopt.Attention for {blocks} ONNX Attention nodes, left {left}")
    for a in fused:
        ins = list(a.input) + [""] * (7 - len(a.input))
        attrs = {x.name: onnx.helper.get_attribute_value(x) for x in a.attribute}
        if "_kv_" in name and not (ins[5] and ins[6] and len(a.output) == 3):
            fails.append(f"{name}: {a.name}: no past inputs / present outputs: {list(a.input)} -> {list(a.output)}")
        if "mistral" not in name and (ins[4] or not ins[3] or attrs.get("causal") != 1):
            fails.append(f"{name}: {a.name}: the mask should be causal + compact mask, got {list(a.input)} {attrs}")
    try:
        onnx.checker.check_model(out, full_check=True)
    except Exception as e:  # noqa: BLE001
        fails.append(f"{name}: onnx.checker: {str(e).splitlines()[0]}")
    for data in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
        for what, model in (("export", src), ("optimized", out)):
            fr = subprocess.run([os.path.join(args.bin, "fuserun"), model, "--backend", "cpu", "--check", data],
                                capture_output=True, text=True, timeout=600)
            if fr.returncode:
                tail = (fr.stdout + fr.stderr).strip().splitlines()[-2:]
                fails.append(f"{name}/{os.path.basename(data)} ({what}): fuserun --check exit {fr.returncode}: "
                             f"{' | '.join(tail)}")
    return fails


def main():
    args = lib.parse_args()
    import onnx
    dirs = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(args.src, "models", "pytorch_reference", "*",
                                                                     "model.onnx")) if args.k in p)
    if not dirs:
        print("no models in models/pytorch_reference", file=sys.stderr)
        return 1
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in dirs:
            f = check(args, d, tmp, onnx)
            print(("FAIL " if f else "ok   ") + os.path.basename(d))
            failures += f
    for f in failures:
        print(f)
    print(f"{len(dirs)} models, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
