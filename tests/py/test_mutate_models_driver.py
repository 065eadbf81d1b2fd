"""The structural mutation fuzzer's own logic (fuzz/mutate_models.py, fuzz/model_mutations.py),
without running the tools: a mutation is a function of (seed, index) alone, every mutation kind
changes something on the real exports, and the classifier sorts tool runs the way
docs/testing.md says (a sanitizer report is never taken for a rejection, a rejection must be one
line naming the file, ONNX Runtime lacking a kernel for input and output alike is
reference-unavailable and nothing else is)."""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def check_classifier(mm, fails):
    path = "/tmp/x/m7.onnx"
    names = mm.ModelNames({"attn.softmax", "logits"})
    names.ops = frozenset({"Softmax", "MatMul"})
    cases = [
        # (tool, rc, stderr, expected class)
        ("fuseopt", 0, "", "accepted"),
        ("fuseopt", 1, f"fuseopt: error: {path}: node 'a' (Add) reads 'q'\n", "rejected"),
        ("fuseopt", 1, "fuseopt: error: internal: empty value name\n", "bad-rejection"),
        ("fuseopt", 1, f"fuseopt: error: {path}: bad\nsecond line\n", "bad-rejection"),
        ("fuseopt", 1, f"some warning\nfuseopt: error: {path}: bad\n", "bad-rejection"),
        ("fuseopt", 86, "==1==ERROR: AddressSanitizer: heap-buffer-overflow\n", "sanitizer"),
        ("fuseopt", 1, "x.cc:3:5: runtime error: signed integer overflow\n", "sanitizer"),
        ("fuseopt", 1, f"fuseopt: error: {path}: x\n==1==ERROR: LeakSanitizer: detected memory leaks\n",
         "sanitizer"),
        ("fuseopt", -11, "", "crash"),
        ("fuseopt", None, "", "hang"),
        ("fuserun", 2, "fuserun: error: input 'logits' has no declared shape\n", "rejected"),
        ("fuserun", 2, "fuserun: error: Softmax 'x': axis 9 out of range\n", "rejected"),
        ("fuserun", 2, "fuserun: error: vector::_M_range_check\n", "bad-rejection"),
    ]
    for tool, rc, err, want in cases:
        got, detail = mm.classify(tool, rc, err, path, names)
        if got != want:
            fails.append(f"classify({tool}, rc={rc}, {err.strip()[:60]!r}) = {got} ({detail}), want {want}")


def check_reference_unavailable(mm, fails):
    # ONNX Runtime without a kernel, for the output and the input alike (seed 1 m957, seed 6 m530):
    # reference-unavailable; anything else stays invalid-output.
    pow15 = ("onnxruntime: [ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Failed to find kernel for Pow(15) "
             "(node:'rms.pow' ep:'CPUExecutionProvider'). Op with name (rms.pow) ...")
    mul6 = ("onnxruntime: [ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for "
            "Mul(6) node with name 'outer.scaled'")
    add6 = mul6.replace("Mul(6)", "Add(6)")
    other = "onnxruntime: [ONNXRuntimeError] : 1 : FAIL : attribute reverse can only be 0 or 1"
    checker = "onnx.checker: [ShapeInferenceError] ... NOT_IMPLEMENTED : Could not find an implementation for Mul(6)"
    cases = [
        (pow15, pow15, True),
        (mul6, mul6.replace("outer.scaled", "other_name"), True),  # node names may change, op and version not
        (mul6, add6, False),      # another op refused in the input: fuseopt changed something
        (mul6, None, False),      # the input runs: fuseopt broke it
        (mul6, other, False),
        (other, other, False),    # a refusal other than a missing kernel
        (checker, checker, False),  # the checker refused the output
        (None, None, False),
    ]
    for out, inp, want in cases:
        got = mm.reference_unavailable(out, inp) is not None
        if got != want:
            fails.append(f"reference_unavailable({(out or '')[:50]!r}, {(inp or '')[:50]!r}) = {got}, want {want}")
    if mm.no_kernel_op(pow15) != "Pow(15)" or mm.no_kernel_op(mul6) != "Mul(6)":
        fails.append(f"no_kernel_op: {mm.no_kernel_op(pow15)}, {mm.no_kernel_op(mul6)}")
    if mm.REFERENCE_UNAVAILABLE in mm.FAILURES:
        fails.append("reference-unavailable is counted as a failure")


def check_mutations(onnx, mut, bases, fails):
    kinds_seen = set()
    for rel, base in bases:
        raw = base.SerializeToString()
        for fn in mut.STRUCTURAL:
            applied = 0
            for i in range(12):  # a mutation may not apply to a draw (no attribute there, ...)
                m = onnx.ModelProto()
                m.CopyFrom(base)
                what = fn(m, random.Random(f"t:{rel}:{fn.__name__}:{i}"))
                if what is None:
                    continue
                applied += 1
                if m.SerializeToString() == raw:
                    fails.append(f"{fn.__name__} on {rel} says '{what}' but changed nothing")
                    break
            if applied:
                kinds_seen.add(mut.kind_name(fn))
        # Same (seed, index) -> same bytes; another index -> (almost always) other bytes.
        a = mut.mutate(base, random.Random("1:5"))
        b = mut.mutate(base, random.Random("1:5"))
        if a != b:
            fails.append(f"mutate() on {rel} is not a function of its seed")
        data, _ = mut.damage_bytes(raw, random.Random("1:6"))
        if not data:
            fails.append(f"damage_bytes on {rel} gave an empty file")
    missing = {mut.kind_name(f) for f in mut.STRUCTURAL} - kinds_seen
    if missing:
        fails.append(f"mutation kinds that never applied to the test models: {sorted(missing)}")


def main():
    args = lib.parse_args()
    onnx, = lib.require("onnx")
    sys.path.insert(0, os.path.join(args.src, "fuzz"))
    import mutate_models as mm  # noqa: E402
    import model_mutations as mut  # noqa: E402
    fails = []
    check_classifier(mm, fails)
    check_reference_unavailable(mm, fails)
    rels = ["models/real/resnet_tiny_op17_ts/model.onnx", "models/synthetic/attn_gqa/model.onnx",
            "models/synthetic/if_outer_scope/model.onnx", "models/exported/torch_mha_op17_ts/model.onnx"]
    bases = [(r, onnx.load(os.path.join(args.src, r))) for r in rels if os.path.exists(os.path.join(args.src, r))]
    check_mutations(onnx, mut, bases, fails)
    listed = mm.base_models(args.src, 256)
    if not listed or any(not p.endswith(".onnx") for p in listed) or listed != sorted(listed):
        fails.append(f"base_models() gave {listed[:3]}...")
    for f in fails:
        print("FAIL " + f)
    print(f"{len(bases)} models, {len(mut.STRUCTURAL)} structural mutation kinds, {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
