"""The fuseopt command line: report table on stdout, --report JSON, --dot,
--list-passes, --passes/--disable, -q. Uses the bundled resnet_tiny model."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def main():
    args = lib.parse_args()
    model = os.path.join(args.src, "models/real/resnet_tiny_op17_ts/model.onnx")
    if not os.path.exists(model):
        print("SKIP: models/real/resnet_tiny_op17_ts is missing")
        return lib.SKIP
    failures = []
    expect = lib.expecter(failures)

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.onnx")
        rep = os.path.join(tmp, "report.json")
        dot = os.path.join(tmp, "graph.dot")

        r = lib.run_fuseopt(args.bin, "--list-passes")
        expect(r.returncode == 0, "--list-passes exits 0")
        for p in ("const_fold", "dce", "cse", "identity_elim", "AddRelu"):
            expect(p in r.stdout, f"--list-passes lists {p}")

        r = lib.run_fuseopt(args.bin, model, out, "--report", rep, "--dot", dot)
        expect(r.returncode == 0, f"full run exits 0 ({r.stderr.strip()})")
        expect("nodes: 17 -> " in r.stdout, "the table shows nodes before -> after")
        expect("AddRelu" in r.stdout and "matched" in r.stdout, "the table lists fusions with matched counts")
        expect("const_fold" in r.stdout and "rewrites" in r.stdout, "the table lists what each pass changed")
        report = json.load(open(rep))
        for key in ("nodes_before", "nodes_after", "ops_before", "ops_after", "passes", "patterns", "iterations"):
            expect(key in report, f"JSON report has '{key}'")
        add_relu = [p for p in report["patterns"] if p["name"] == "AddRelu"]
        expect(add_relu and add_relu[0]["matched"] == 2, "JSON: AddRelu matched twice (two residual blocks)")
        expect(report["ops_after"].get("fuseopt.AddRelu") == 2 and "Add" not in report["ops_after"],
               "JSON: op counts after show the fused ops")
        text = open(dot).read()
        expect(text.startswith("digraph") and "[AddRelu: Add+Relu]" in text and "fillcolor=\"#" in text,
               "DOT labels fused nodes with the ops they replaced, coloured")
        if shutil.which("dot"):
            d = subprocess.run(["dot", "-Tsvg", dot, "-o", os.path.join(tmp, "g.svg")], capture_output=True)
            expect(d.returncode == 0, "graphviz renders the DOT file")

        r = lib.run_fuseopt(args.bin, model, out, "-q", "--passes", "none", "--report", rep)
        report = json.load(open(rep))
        expect(r.returncode == 0 and r.stdout == "", "-q prints nothing")
        expect(report["nodes_before"] == report["nodes_after"] == 17 and report["passes"] == [],
               "--passes none changes nothing")

        r = lib.run_fuseopt(args.bin, model, out, "-q", "--passes", "cleanup,AddRelu", "--disable", "dce",
                            "--report", rep)
        report = json.load(open(rep))
        ran = [p["name"] for p in report["passes"]]
        expect(r.returncode == 0 and "AddRelu" in ran and "const_fold" in ran and "dce" not in ran
               and "FusedMatMul" not in ran, f"--passes/--disable select by name and category (ran {ran})")

        r = lib.run_fuseopt(args.bin, model)
        lines = r.stderr.strip().splitlines()
        expect(r.returncode != 0 and len(lines) == 1 and lines[0].startswith("fuseopt: error:"),
               "a missing output argument is one error line")
        r = lib.run_fuseopt(args.bin, model, out, "--no-such-flag")
        lines = r.stderr.strip().splitlines()
        expect(r.returncode != 0 and len(lines) == 1 and lines[0].startswith("fuseopt: error:"),
               "an unknown flag is one error line")
        # External data: weights in a side file are read, and written next to the output.
        try:
            import numpy as np
            import onnx
            from onnx import helper, numpy_helper, TensorProto as TP
        except ImportError:
            print("skip external data case: numpy/onnx missing")
        else:
            ext_dir = os.path.join(tmp, "ext")
            os.makedirs(ext_dir)
            w = numpy_helper.from_array(np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000.0, "w")
            g = helper.make_graph(
                [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Identity", ["m"], ["i"]),
                 helper.make_node("Relu", ["i"], ["y"])], "ext",
                [helper.make_tensor_value_info("x", TP.FLOAT, ["n", 64])],
                [helper.make_tensor_value_info("y", TP.FLOAT, ["n", 32])], initializer=[w])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
            m.ir_version = 8
            src = os.path.join(ext_dir, "model.onnx")
            onnx.save(m, src, save_as_external_data=True, location="weights.bin", size_threshold=0)
            dst = os.path.join(tmp, "ext_out.onnx")
            r = lib.run_fuseopt(args.bin, src, dst, "-q", "--passes", "cleanup")
            expect(r.returncode == 0, f"external-data model optimizes ({r.stderr.strip()})")
            expect(os.path.exists(dst + ".data"), "weights go to a side file next to the output")
            x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
            want = lib.run_ort(src, [x])[0]
            got = lib.run_ort(dst, [x])[0]
            expect(lib.compare(got, want, 1e-6, 1e-6) is None, "external-data output matches ONNX Runtime")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
