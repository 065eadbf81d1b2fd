"""External data through the fuseopt CLI (issue 2 item 3), checked with onnx and
ONNX Runtime:
- a model whose weights live in model.onnx.data (models/synthetic/external_data_mlp),
  written to another folder, keeps its weights in OUT.onnx.data next to the output
  (relative location, no path parts), ONNX Runtime runs it to the reference outputs,
  and the input model and its side file are untouched;
- `--external-data` forces a side file for an inline model (every initializer of
  1 KiB or more goes out, smaller ones stay inline), onnx.checker accepts it and
  ONNX Runtime reproduces test_data_set_0; without the flag no side file appears;
- both are deterministic: two runs write identical model and side-file bytes.
The > 2 GiB decision is unit-tested in tests/unit/onnx_io_external_test.cc."""
import hashlib
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    args = lib.parse_args()
    np, onnx, _ = lib.require("numpy", "onnx", "onnxruntime")
    failures = []
    expect = lib.expecter(failures)

    def locations(path):
        m = onnx.load(path, load_external_data=False)
        ext, inline = {}, {}
        for t in m.graph.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                ext[t.name] = {e.key: e.value for e in t.external_data}
            else:
                inline[t.name] = t
        return ext, inline

    def matches_reference(path, model_dir):
        inputs, refs = lib.load_test_data(model_dir)
        got = lib.run_ort(path, inputs)
        return len(got) == len(refs) and all(lib.compare(g, w, 1e-5, 1e-5) is None for g, w in zip(got, refs))

    ext_dir = os.path.join(args.src, "models", "synthetic", "external_data_mlp")
    res_dir = os.path.join(args.src, "models", "real", "resnet_tiny_op17_ts")
    for d in (ext_dir, res_dir):
        if not os.path.exists(os.path.join(d, "model.onnx")):
            print(f"FAIL: {d} is missing")
            return 1

    with tempfile.TemporaryDirectory() as tmp:
        # 1. External in, external out, in another folder.
        src = os.path.join(ext_dir, "model.onnx")
        before = (sha(src), sha(src + ".data"))
        for mode in ("none", "cleanup"):
            out_dir = os.path.join(tmp, f"ext_{mode}")
            os.makedirs(out_dir)
            out = os.path.join(out_dir, "out.onnx")
            r = lib.run_fuseopt(args.bin, src, out, "-q", "--passes", mode)
            expect(r.returncode == 0, f"[{mode}] external-data model is accepted ({r.stderr.strip()})")
            if r.returncode != 0:
                continue
            ext, inline = locations(out)
            locs = {e.get("location") for e in ext.values()}
            expect(os.path.exists(out + ".data") and locs == {"out.onnx.data"},
                   f"[{mode}] weights go to out.onnx.data next to the output, relative location (got {locs})")
            expect(set(ext) == {"fc1.weight", "fc2.weight"} and set(inline) == {"fc1.bias", "fc2.bias"},
                   f"[{mode}] tensors of 1 KiB or more external, smaller inline ({sorted(ext)} / {sorted(inline)})")
            expect(not os.path.exists(os.path.join(ext_dir, "out.onnx.data")),
                   f"[{mode}] nothing is written next to the input")
            onnx.checker.check_model(out, full_check=True)
            expect(matches_reference(out, ext_dir), f"[{mode}] ONNX Runtime reproduces the reference outputs")
            loaded = onnx.load(out)  # load_external_data=True: the side file is self-consistent
            expect(all(t.data_location != onnx.TensorProto.EXTERNAL for t in loaded.graph.initializer),
                   f"[{mode}] onnx.load reads every weight back from the side file")
        expect((sha(src), sha(src + ".data")) == before, "the input model and its side file are unchanged")

        # 2. --external-data on an inline model; and no side file without it.
        src = os.path.join(res_dir, "model.onnx")
        runs = []
        for run in ("a", "b"):
            out_dir = os.path.join(tmp, f"forced_{run}")
            os.makedirs(out_dir)
            out = os.path.join(out_dir, "resnet.onnx")
            r = lib.run_fuseopt(args.bin, src, out, "-q", "--external-data")
            expect(r.returncode == 0, f"--external-data run {run} exits 0 ({r.stderr.strip()})")
            runs.append(out)
        out = runs[0]
        if os.path.exists(out):
            ext, inline = locations(out)
            expect(os.path.exists(out + ".data") and ext and {e["location"] for e in ext.values()} == {"resnet.onnx.data"},
                   "--external-data writes resnet.onnx.data with a relative location")
            big_inline = [n for n, t in inline.items() if len(t.raw_data) >= 1024]
            expect(not big_inline, f"--external-data leaves no tensor of 1 KiB or more inline ({big_inline})")
            offsets = sorted((int(e["offset"]), int(e["length"])) for e in ext.values())
            size = os.path.getsize(out + ".data")
            expect(all(o % 4096 == 0 and o + n <= size for o, n in offsets) and
                   all(a[0] + a[1] <= b[0] for a, b in zip(offsets, offsets[1:])),
                   "side-file entries are 4 KiB aligned, in bounds and do not overlap")
            onnx.checker.check_model(out, full_check=True)
            expect(matches_reference(out, res_dir), "ONNX Runtime runs the --external-data model to test_data_set_0")
            expect(all(os.path.exists(p) for p in runs) and
                   open(runs[0], "rb").read() == open(runs[1], "rb").read() and
                   open(runs[0] + ".data", "rb").read() == open(runs[1] + ".data", "rb").read(),
                   "two --external-data runs write identical model and side-file bytes")
        plain = os.path.join(tmp, "plain.onnx")
        r = lib.run_fuseopt(args.bin, src, plain, "-q")
        expect(r.returncode == 0 and os.path.exists(plain) and not os.path.exists(plain + ".data"),
               "without --external-data an inline model stays one file")
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
