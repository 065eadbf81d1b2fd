#!/usr/bin/env python3
"""fuserun --compare-cpu: every node output exposed, one run per backend, node outputs compared in graph order.

On the CPU backend the comparison is against itself, so every node output must agree ("0 of N"), N must
count the model's node outputs (the intermediates really were exposed), and the exit status must be 0;
on a model with an If (outer-scope reads) too. A bad model path still fails with one line.
Invoked by ctest as: test_fuserun_compare_cpu.py --bin <build>/bin --src <repo>.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fuseopt_testlib import parse_args, require  # noqa: E402

onnx, = require("onnx")


def main():
    args = parse_args()
    fuserun = os.path.join(args.bin, "fuserun")
    ok = True
    for rel in ("models/real/bert_eager_op17_ts", "models/synthetic/if_outer_scope"):
        d = os.path.join(args.src, rel)
        m = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
        n_outputs = sum(1 for n in m.graph.node for o in n.output if o)
        r = subprocess.run([fuserun, os.path.join(d, "model.onnx"), "--backend", "cpu", "--compare-cpu", "--check",
                            os.path.join(d, "test_data_set_0"), "-q"], capture_output=True, text=True)
        got = re.search(r"compare-cpu: (\d+) of (\d+) node outputs over tolerance", r.stdout)
        if r.returncode != 0 or not got or got.group(1) != "0" or int(got.group(2)) < n_outputs:
            ok = False
            print(f"FAIL {rel}: rc {r.returncode}, expected 0 of >= {n_outputs}\n{r.stdout}{r.stderr}")
        else:
            print(f"ok   {rel}: {got.group(0)}")
    r = subprocess.run([fuserun, "/nonexistent.onnx", "--compare-cpu"], capture_output=True, text=True)
    if r.returncode == 0 or "nonexistent" not in r.stderr:
        ok = False
        print(f"FAIL bad path: rc {r.returncode} {r.stderr}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
