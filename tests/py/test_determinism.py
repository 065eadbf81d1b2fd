"""Determinism and idempotence of fuseopt on every model under models/:
- optimizing the same file twice (all passes) gives byte-identical models (and
  identical --dot files);
- optimizing the optimized model again changes nothing (same op counts, no
  fusion matches, zero rewrites reported)."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    args = lib.parse_args()
    dirs = lib.model_dirs(args.src, args.k)
    if not dirs:
        print("SKIP: no models under models/")
        return lib.SKIP
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in dirs:
            name = os.path.basename(d)
            src = os.path.join(d, "model.onnx")
            outs = []
            for run in ("a", "b"):
                # Same file name in two folders: an external-data side file is named after it.
                os.makedirs(os.path.join(tmp, run), exist_ok=True)
                out = os.path.join(tmp, run, f"{name}.onnx")
                dot = os.path.join(tmp, run, f"{name}.dot")
                r = lib.run_fuseopt(args.bin, src, out, "-q", "--dot", dot)
                if r.returncode != 0:
                    failures.append(f"{name}: fuseopt exit {r.returncode}: {r.stderr.strip()}")
                    break
                outs.append((out, dot))
            if len(outs) != 2:
                continue
            if read(outs[0][0]) != read(outs[1][0]):
                failures.append(f"{name}: two runs wrote different models")
            side = [o + ".data" for o, _ in outs]
            if os.path.exists(side[0]) != os.path.exists(side[1]) or (
                    os.path.exists(side[0]) and read(side[0]) != read(side[1])):
                failures.append(f"{name}: two runs wrote different external-data files")
            if read(outs[0][1]) != read(outs[1][1]):
                failures.append(f"{name}: two runs wrote different DOT files")
            again = os.path.join(tmp, f"{name}.again.onnx")
            report = os.path.join(tmp, f"{name}.again.json")
            r = lib.run_fuseopt(args.bin, outs[0][0], again, "-q", "--report", report)
            if r.returncode != 0:
                failures.append(f"{name}: second optimization failed: {r.stderr.strip()}")
                continue
            rep = json.load(open(report))
            problems = []
            if rep["ops_before"] != rep["ops_after"]:
                problems.append(f"op counts changed {rep['ops_before']} -> {rep['ops_after']}")
            matched = {p["name"]: p["matched"] for p in rep["patterns"] if p["matched"]}
            if matched:
                problems.append(f"fusions fired again: {matched}")
            rewrites = {p["name"]: p["rewrites"] for p in rep["passes"] if p["rewrites"]}
            if rewrites:
                problems.append(f"passes rewrote again: {rewrites}")
            for p in problems:
                failures.append(f"{name}: not idempotent: {p}")
            print(f"{'FAIL' if problems else 'ok  '} {name}: deterministic, nodes {rep['nodes_before']}"
                  f" -> {rep['nodes_after']} on the second run")
    for f in failures:
        print("FAIL " + f)
    print(f"{len(dirs)} models, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
