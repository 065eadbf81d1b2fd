"""The structural mutation fuzzer's own logic (fuzz/mutate_models.py, fuzz/model_mutations.py),
without running the tools: a mutation is a function of (seed, index) alone, every mutation kind
changes something on the real exports, and the classifier sorts tool runs the way
docs/testing.md says (a sanitizer report is never taken for a rejection, a rejection must be one
line naming the file)."""
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
