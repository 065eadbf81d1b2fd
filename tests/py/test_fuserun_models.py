#!/usr/bin/env python3
"""fuserun --backend cpu --check passes at fp32 (rtol 1e-4) on every bundled model.

Every folder models/real/<m>/ and models/exported/<m>/ with model.onnx and
test_data_set_0/ (reference outputs computed by ONNX Runtime) is checked, on each of
its test_data_set_N/ (the KV-cache steps have two), every output compared.
Invoked by ctest as: test_fuserun_models.py --bin <build>/bin --src <repo>.
"""
import argparse
import pathlib
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--src", required=True)
    args = ap.parse_args()
    fuserun = pathlib.Path(args.bin) / "fuserun"
    src = pathlib.Path(args.src)
    models = sorted(
        p.parent
        for sub in ("real", "exported")
        for p in (src / "models" / sub).glob("*/model.onnx")
        if (p.parent / "test_data_set_0").is_dir()
    )
    if not models:
        print("no models with test data found", file=sys.stderr)
        return 77
    failures = []
    for m in models:
        for data in sorted(m.glob("test_data_set_*")):
            cmd = [str(fuserun), "--backend", "cpu", "-q", "--check", str(data), str(m / "model.onnx")]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            verdict = "PASS" if r.returncode == 0 and "check: PASS" in r.stdout else "FAIL"
            outputs = sum(1 for ln in r.stdout.splitlines() if ln.strip().startswith(("ok ", "FAIL ")))
            print(f"{verdict} {m.relative_to(src)}/{data.name} ({outputs} outputs)")
            if verdict != "PASS":
                failures.append(data)
                print(r.stdout[-2000:], r.stderr[-2000:], sep="\n")
    print(f"{len(models)} models, {len(failures)} data sets failing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
