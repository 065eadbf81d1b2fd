#!/usr/bin/env python3
"""fuserun on bad input: one-line error, non-zero exit, no crash.

Builds broken models with the onnx Python package (skipped when it is not
installed) and broken --check folders from a bundled model.
Invoked by ctest as: test_fuserun_errors.py --bin <build>/bin --src <repo>.
"""
import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile


def run(fuserun, *args):
    return subprocess.run([str(fuserun), *map(str, args)], capture_output=True, text=True, timeout=300)


def expect_error(name, r, *needles, code=2):
    ok = r.returncode == code and all(n in r.stderr for n in needles)
    err_lines = [l for l in r.stderr.splitlines() if "error" in l]
    ok = ok and len(err_lines) == 1
    print(("ok   " if ok else "FAIL ") + name + ": rc=" + str(r.returncode) + " " + r.stderr.strip()[:300])
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--src", required=True)
    args = ap.parse_args()
    fuserun = pathlib.Path(args.bin) / "fuserun"
    src = pathlib.Path(args.src)
    bert = src / "models" / "real" / "bert_eager_op17_ts"
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        results.append(expect_error("missing model", run(fuserun, "--backend", "cpu", tmp / "nope.onnx"), "nope.onnx"))
        results.append(expect_error("bad precision", run(fuserun, "--backend", "cpu", "--precision", "fp8", bert / "model.onnx"), "fp8"))
        results.append(expect_error("fp16 on cpu", run(fuserun, "--backend", "cpu", "--precision", "fp16", bert / "model.onnx"), "fp16", "cpu"))
        results.append(expect_error("unknown --shape name", run(fuserun, "--backend", "cpu", "--shape", "foo=2x3", bert / "model.onnx"), "foo"))
        results.append(expect_error("wrong rank --shape", run(fuserun, "--backend", "cpu", "--shape", "input_ids=2x3x4", bert / "model.onnx"), "input_ids"))
        # --check folder problems.
        d = tmp / "check_missing"
        shutil.copytree(bert / "test_data_set_0", d)
        (d / "input_1.pb").unlink()
        results.append(expect_error("missing input_1.pb", run(fuserun, "--backend", "cpu", "--check", d, bert / "model.onnx"), "input_1.pb"))
        d2 = tmp / "check_mistyped"
        shutil.copytree(bert / "test_data_set_0", d2)
        shutil.copy(d2 / "output_0.pb", d2 / "input_0.pb")  # a float tensor where int64 ids are expected
        results.append(expect_error("mistyped input", run(fuserun, "--backend", "cpu", "--check", d2, bert / "model.onnx"), "float32"))
        d3 = tmp / "check_garbage"
        shutil.copytree(bert / "test_data_set_0", d3)
        (d3 / "output_0.pb").write_bytes(b"\xff\xff\xff garbage")
        results.append(expect_error("garbage output_0.pb", run(fuserun, "--backend", "cpu", "--check", d3, bert / "model.onnx"), "output_0.pb"))
        try:
            import onnx
            from onnx import helper, TensorProto
        except ImportError:
            onnx = None
        if onnx is not None:
            # Ops without kernels: all named at once.
            x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
            y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
            # (Both in a custom domain: an unknown op of the ONNX domain is refused at load,
            # with every such node listed, by the schema check; see test_schema_validation.)
            nodes = [helper.make_node("NoSuchOpA", ["x"], ["a"], name="na", domain="my.domain"),
                     helper.make_node("NoSuchOpB", ["a"], ["y"], name="nb", domain="my.domain")]
            g = helper.make_graph(nodes, "g", [x], [y])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.domain", 1)])
            onnx.save(m, tmp / "missing_ops.onnx")
            results.append(expect_error("missing kernels", run(fuserun, "--backend", "cpu", tmp / "missing_ops.onnx"), "NoSuchOpA", "NoSuchOpB", "'na'", "'nb'"))
            # A Reshape that cannot hold: fails only at run time.
            shape = helper.make_tensor("shape", TensorProto.INT64, [2], [4, 4])
            nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"], name="bad_reshape")]
            g = helper.make_graph(nodes, "g", [x], [y], initializer=[shape])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
            onnx.save(m, tmp / "bad_reshape.onnx")
            results.append(expect_error("runtime reshape", run(fuserun, "--backend", "cpu", "--iters", "0", tmp / "bad_reshape.onnx"), "bad_reshape", "[2,3]"))
            # Broadcast mismatch between two inputs.
            x2 = helper.make_tensor_value_info("x2", TensorProto.FLOAT, ["batch", 4])
            nodes = [helper.make_node("Add", ["x", "x2"], ["y"], name="bad_add")]
            g = helper.make_graph(nodes, "g", [x, x2], [y])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
            onnx.save(m, tmp / "bad_add.onnx")
            results.append(expect_error("broadcast mismatch", run(fuserun, "--backend", "cpu", "--shape", "x2=2x4", tmp / "bad_add.onnx"), "bad_add", "[2,3]", "[2,4]"))
        # --shape before the model takes one value; symbolic dims bind by name.
        r = run(fuserun, "--backend", "cpu", "--shape", "seq=16", "--shape", "batch=3", bert / "model.onnx", "--iters", "1")
        ok = r.returncode == 0 and "[3,16,128]" in r.stdout
        print(("ok   " if ok else "FAIL ") + "--shape before the model: rc=" + str(r.returncode) + " " + r.stderr.strip()[:200])
        results.append(ok)
        # Default batch 1 / seq 128 exceeds this model's 64 positions: the error names the defaults.
        r = run(fuserun, "--backend", "cpu", bert / "model.onnx")
        results.append(expect_error("defaulted dims named", r, "seq=128", "--shape"))
        # A check that fails: exit 1, not 2.
        d4 = tmp / "check_wrong"
        shutil.copytree(bert / "test_data_set_0", d4)
        r = run(fuserun, "--backend", "cpu", "--check", d4, "--rtol", "0", bert / "model.onnx")
        ok = r.returncode == 1 and "check: FAIL" in r.stdout
        print(("ok   " if ok else "FAIL ") + "over tolerance exits 1: rc=" + str(r.returncode))
        results.append(ok)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
