"""The models folder (issue 2 item 7) is what the other tests assume:
- every model of ../shared/models is copied, byte-identical, into models/real
  (so the round-trip and determinism tests cover it; skipped when ../shared is absent);
- every models/{real,exported,synthetic}/<name>/ has model.onnx and a
  test_data_set_0 whose input_N.pb / output_N.pb match the graph's inputs and
  outputs in count, name and element type (the ONNX backend-test layout);
- external-data locations are relative and stay inside the model's folder."""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def main():
    args = lib.parse_args()
    onnx, = lib.require("onnx")
    failures = []
    shared = os.path.normpath(os.path.join(args.src, "..", "shared", "models"))
    shared_models = sorted(glob.glob(os.path.join(shared, "*", "model.onnx")))
    if not shared_models:
        print(f"note: {shared} has no models; copy check skipped")
    for p in shared_models:
        name = os.path.basename(os.path.dirname(p))
        copy = os.path.join(args.src, "models", "real", name, "model.onnx")
        same = os.path.exists(copy) and open(p, "rb").read() == open(copy, "rb").read()
        for ref in sorted(glob.glob(os.path.join(os.path.dirname(p), "test_data_set_0", "*.pb"))):
            c = os.path.join(args.src, "models", "real", name, "test_data_set_0", os.path.basename(ref))
            same = same and os.path.exists(c) and open(ref, "rb").read() == open(c, "rb").read()
        print(f"{'ok  ' if same else 'FAIL'} ../shared/models/{name} is in models/real, byte-identical")
        if not same:
            failures.append(f"../shared/models/{name}: no identical copy in models/real/{name}")

    dirs = sorted(os.path.dirname(os.path.abspath(p)) for sub in ("real", "exported", "synthetic")
                  for p in glob.glob(os.path.join(args.src, "models", sub, "*", "model.onnx")))
    for d in dirs:
        rel = os.path.relpath(d, os.path.abspath(os.path.join(args.src, "models")))
        problems = []
        m = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
        for t in m.graph.initializer:
            for e in t.external_data:
                if e.key == "location":
                    target = os.path.normpath(os.path.join(d, e.value))
                    if os.path.isabs(e.value) or not target.startswith(d + os.sep) or not os.path.exists(target):
                        problems.append(f"external location {e.value!r} of {t.name}")
        inits = {t.name for t in m.graph.initializer}
        graph_inputs = [i for i in m.graph.input if i.name not in inits]
        td = os.path.join(d, "test_data_set_0")
        for prefix, decl in (("input", graph_inputs), ("output", list(m.graph.output))):
            files = sorted(glob.glob(os.path.join(td, f"{prefix}_*.pb")))
            if len(files) != len(decl):
                problems.append(f"{len(files)} {prefix}_N.pb files for {len(decl)} graph {prefix}s")
                continue
            for i, v in enumerate(decl):
                t = onnx.TensorProto()
                with open(os.path.join(td, f"{prefix}_{i}.pb"), "rb") as f:
                    t.ParseFromString(f.read())
                if t.name != v.name or t.data_type != v.type.tensor_type.elem_type:
                    problems.append(f"{prefix}_{i}.pb is {t.name!r} type {t.data_type}, graph says {v.name!r} "
                                    f"type {v.type.tensor_type.elem_type}")
        print(f"{'FAIL' if problems else 'ok  '} models/{rel}: {len(graph_inputs)} inputs, "
              f"{len(m.graph.output)} outputs {problems}")
        failures += [f"models/{rel}: {p}" for p in problems]
    print(f"{len(dirs)} model folders, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
