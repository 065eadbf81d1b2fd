"""Round trip of every model in models/real and models/exported through fuseopt:
with no passes (load + save) and with the cleanup passes, the written model must
pass onnx.checker (full_check) and ONNX Runtime must reproduce test_data_set_0
within 1e-5. The input file must stay byte-identical."""
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

MODES = [("none", ["--passes", "none"]), ("cleanup", ["--passes", "cleanup"])]
ATOL = RTOL = 1e-5


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_one(args, model_dir, tmp):
    import onnx
    name = os.path.basename(model_dir)
    src = os.path.join(model_dir, "model.onnx")
    before = sha(src)
    inputs, refs = lib.load_test_data(model_dir)
    failures = []
    for mode, flags in MODES:
        out = os.path.join(tmp, f"{name}.{mode}.onnx")
        r = lib.run_fuseopt(args.bin, src, out, "-q", *flags)
        if r.returncode != 0:
            failures.append(f"{name} [{mode}]: fuseopt exit {r.returncode}: {r.stderr.strip()}")
            continue
        model = onnx.load(out, load_external_data=False)
        opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
        if opset <= onnx.defs.onnx_opset_version():
            try:
                onnx.checker.check_model(out, full_check=True)
            except Exception as e:  # noqa: BLE001 - any checker complaint is a failure
                failures.append(f"{name} [{mode}]: onnx.checker: {str(e).splitlines()[0]}")
        try:
            got = lib.run_ort(out, inputs)
        except Exception as e:  # noqa: BLE001
            failures.append(f"{name} [{mode}]: onnxruntime failed: {str(e).splitlines()[0]}")
            continue
        if len(got) != len(refs):
            failures.append(f"{name} [{mode}]: {len(got)} outputs, reference has {len(refs)}")
            continue
        for i, (g, w) in enumerate(zip(got, refs)):
            problem = lib.compare(g, w, ATOL, RTOL)
            if problem:
                failures.append(f"{name} [{mode}]: output {i}: {problem}")
        print(f"ok   {name} [{mode}] nodes {len(onnx.load(src, load_external_data=False).graph.node)}"
              f" -> {len(model.graph.node)}")
    if sha(src) != before:
        failures.append(f"{name}: the input file was modified")
    return failures


def main():
    return lib.run_over_models(check_one, "numpy", "onnx", "onnxruntime")


if __name__ == "__main__":
    sys.exit(main())
