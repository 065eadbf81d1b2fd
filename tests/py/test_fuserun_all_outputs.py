#!/usr/bin/env python3
"""`fuserun --check` compares EVERY output of a model (issue 15, Deliver 3), on the
multi-output head exports (question answering: start/end logits; CLIP: four outputs;
a KV-cache step: logits + presents):
  - a passing check prints one `ok` line per graph output, by name;
  - a wrong reference in any one output (not only the first) fails the check (exit 1)
    naming that output, the others still `ok`;
  - references stored in another file order but named after the graph outputs are
    matched by name (still PASS);
  - a reference file beyond the model's outputs (output_N.pb, N = output count) is an
    error naming it (exit 2: a reference that would not be compared), as is a missing one;
  - --json's check.outputs has one entry per graph output.
Invoked by ctest as: test_fuserun_all_outputs.py --bin <build>/bin --src <repo>."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

MODELS = ["bert_qa_op17_ts", "clip_op18_dynamo", "gpt2_lm_kv_op17_ts"]


def fuserun(args, model, data, *extra):
    return subprocess.run([os.path.join(args.bin, "fuserun"), model, "--backend", "cpu", "--check", data, *extra],
                          capture_output=True, text=True, timeout=600)


def ok_lines(stdout):
    return [ln.split()[1].rstrip(":") for ln in stdout.splitlines() if ln.strip().startswith("ok ")]


def fail_lines(stdout):
    return [ln.split()[1].rstrip(":") for ln in stdout.splitlines() if ln.strip().startswith("FAIL ")]


def perturb(path, onnx, numpy_helper):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    a = numpy_helper.to_array(t).copy()
    a.flat[a.size // 2] += 1.0 + abs(float(a.flat[a.size // 2]))
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(a, t.name).SerializeToString())


def check_model(args, d, tmp, onnx, numpy_helper):
    name = os.path.basename(d)
    fails = []
    model = os.path.join(d, "model.onnx")
    data = os.path.join(d, "test_data_set_0")
    outs = [o.name for o in onnx.load(model, load_external_data=False).graph.output]
    if len(outs) < 2:
        return [f"{name}: has {len(outs)} output(s); this test needs a multi-output model"]
    jf = os.path.join(tmp, name + ".json")
    r = fuserun(args, model, data, "--json", jf)
    if r.returncode != 0 or ok_lines(r.stdout) != outs:
        fails.append(f"{name}: passing check: rc {r.returncode}, ok lines {ok_lines(r.stdout)}, outputs {outs}")
    else:
        with open(jf) as f:
            got = [o["name"] for o in json.load(f)["check"]["outputs"]]
        if got != outs:
            fails.append(f"{name}: --json check.outputs {got}, graph outputs {outs}")
    # A wrong reference in each output in turn: that output fails, the others stay ok.
    for i, o in enumerate(outs):
        bad = os.path.join(tmp, f"{name}_bad{i}")
        shutil.copytree(data, bad)
        perturb(os.path.join(bad, f"output_{i}.pb"), onnx, numpy_helper)
        r = fuserun(args, model, bad)
        if r.returncode != 1 or "check: FAIL" not in r.stdout or fail_lines(r.stdout) != [o] or \
                ok_lines(r.stdout) != [x for x in outs if x != o]:
            fails.append(f"{name}: wrong output_{i}.pb ({o}): rc {r.returncode}, FAIL {fail_lines(r.stdout)}, "
                         f"ok {ok_lines(r.stdout)}")
    # References in reversed file order, each named after its graph output: matched by name.
    rev = os.path.join(tmp, f"{name}_reversed")
    shutil.copytree(data, rev)
    n = len(outs)
    for i in range(n):
        shutil.copy(os.path.join(data, f"output_{i}.pb"), os.path.join(rev, f"output_{n - 1 - i}.pb"))
    r = fuserun(args, model, rev)
    if r.returncode != 0 or ok_lines(r.stdout) != outs:
        fails.append(f"{name}: named references in reversed order: rc {r.returncode}, ok {ok_lines(r.stdout)}")
    # One reference more than the model has outputs; one missing.
    extra = os.path.join(tmp, f"{name}_extra")
    shutil.copytree(data, extra)
    shutil.copy(os.path.join(data, "output_0.pb"), os.path.join(extra, f"output_{n}.pb"))
    r = fuserun(args, model, extra)
    if r.returncode != 2 or f"output_{n}.pb" not in r.stderr:
        fails.append(f"{name}: extra output_{n}.pb: rc {r.returncode}, stderr {r.stderr.strip()[:200]}")
    missing = os.path.join(tmp, f"{name}_missing")
    shutil.copytree(data, missing)
    os.remove(os.path.join(missing, f"output_{n - 1}.pb"))
    r = fuserun(args, model, missing)
    if r.returncode != 2 or f"output_{n - 1}.pb" not in r.stderr:
        fails.append(f"{name}: missing output_{n - 1}.pb: rc {r.returncode}, stderr {r.stderr.strip()[:200]}")
    print(("ok   " if not fails else "FAIL ") + f"{name}: {n} outputs, each compared")
    return fails


def main():
    args = lib.parse_args()
    onnx, = lib.require("onnx")
    from onnx import numpy_helper
    dirs = [os.path.join(args.src, "models", "exported", m) for m in MODELS]
    missing = [d for d in dirs if not os.path.isdir(d)]
    if missing:
        print(f"FAIL: bundled models missing: {missing}")
        return 1
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in dirs:
            failures += check_model(args, d, tmp, onnx, numpy_helper)
    for f in failures:
        print("FAIL " + f)
    print(f"{len(dirs)} models, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
