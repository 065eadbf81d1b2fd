#!/usr/bin/env python3
"""Fusion coverage survey: runs fuseopt on every model folder given (each with
model.onnx and test_data_set_0/), and prints one line per model: nodes before
and after (If/Loop/Scan bodies included), fused Attention ops against the Softmax ops of the export
(a Softmax of a weight projection, a MoE router's, not counted), fused
GEMMs, primitives left, ONNX Runtime's norm-wise relative error of the
optimized model against the reference, and whether `fuserun --backend cpu
--check` passes.

  python3 tools/survey_models.py [--bin build/bin] models/exported/* models/real/*
"""
import argparse
import collections
import glob
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
from _fuseopt_testlib import all_nodes, weight_gemm_softmaxes  # noqa: E402  (If/Loop/Scan bodies included)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("dirs", nargs="*")
    a = ap.parse_args()
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    dirs = a.dirs or sorted(glob.glob("models/*/*/"))
    tmp = tempfile.mkdtemp(prefix="fuseopt_survey_")
    bad = 0
    for d in dirs:
        d = d.rstrip("/")
        if not os.path.exists(os.path.join(d, "model.onnx")):
            continue
        name = os.path.basename(d)
        out = os.path.join(tmp, name + ".onnx")
        orig = onnx.load(os.path.join(d, "model.onnx"))
        # Attention blocks: Softmax nodes, or the standard Attention nodes of opset-23 exports.
        # A Softmax of a weight projection (MoE router, ConvBERT's dynamic-conv kernel) is not one.
        softmax = sum(1 for n in all_nodes(orig.graph)
                      if n.op_type == "Softmax" or (n.op_type == "Attention" and n.domain in ("", "ai.onnx"))) \
            - len(weight_gemm_softmaxes(orig.graph))
        r = subprocess.run([os.path.join(a.bin, "fuseopt"), os.path.join(d, "model.onnx"), out, "-q"],
                           capture_output=True, text=True)
        if r.returncode:
            print(f"{name:28s} FUSEOPT FAILED: {r.stderr.strip()[:200]}")
            bad += 1
            continue
        m = onnx.load(out)
        c = collections.Counter((n.domain + "." if n.domain else "") + n.op_type for n in all_nodes(m.graph))
        data = os.path.join(d, "test_data_set_0")
        try:
            s = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
            files = sorted(glob.glob(data + "/input_*.pb"), key=lambda f: int(f.rsplit("_", 1)[1][:-3]))  # N's order
            ins = [numpy_helper.to_array(onnx.load_tensor(f)) for f in files]
            ref = numpy_helper.to_array(onnx.load_tensor(data + "/output_0.pb")).astype(np.float64)
            o = s.run(None, {i.name: x for i, x in zip(s.get_inputs(), ins)})[0].astype(np.float64)
            err = "%.1e" % float(np.linalg.norm(o - ref) / max(np.linalg.norm(ref), 1e-30))
        except Exception as e:  # report and go on: one model must not hide the others
            err = "FAILED " + str(e).splitlines()[0][:80]
            bad += 1
        r2 = subprocess.run([os.path.join(a.bin, "fuserun"), out, "--backend", "cpu", "--check", data, "-q"],
                            capture_output=True, text=True)
        left = {k: c[k] for k in ["Softmax", "Erf", "Tanh", "ReduceMean", "LayerNormalization", "MatMul", "Gemm"]
                if c.get(k)}
        run = "ok" if r2.returncode == 0 else "FAIL " + r2.stderr.strip()[:100]
        print(f"{name:28s} nodes {len(all_nodes(orig.graph)):4d} -> {len(all_nodes(m.graph)):4d}  attention "
              f"{c.get('fuseopt.Attention', 0)}/{softmax}  gemms {c.get('fuseopt.FusedMatMul', 0)}"
              f"+{c.get('fuseopt.LayerNormLinear', 0)}  left {left}  ort_rel {err}  fuserun-cpu {run}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
