"""fuseopt's conveniences: --input-shape, --check [N], --fp16 / --keep-io-types and the
progress line; every bad value is one `fuseopt: error:` line, a non-zero exit and no
output file.

- --input-shape: the written model's inputs carry the literal dims (symbols bound by
  one input follow on the others), and the fusions match as many candidates as on the
  dynamic model (BERT at 1x16 and 1x64, Llama at 1x128).
- --check: passes on the real models; an optimized model that differs from the
  original (erf GELU turned into the tanh form where the two differ by ~10%) fails
  with one line naming the output and the error, and the output file is not written.
- --fp16: BERT and Llama pass onnx.checker (full check), run in ONNX Runtime CPU within
  1e-2 of the fp32 references, and pass `fuserun --backend cpu --check`; float
  initializers are float16; --keep-io-types keeps the I/O float32; a Resize's scales
  stay float32; an unfused LayerNormalization / Softmax computes in fp32 between Casts.
- progress: after FUSEOPT_PROGRESS_AFTER_S (2 s by default) one line per step on
  stderr off a terminal, in place (carriage return) on a terminal, nothing with -q."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

BERT = "models/real/bert_eager_op17_ts"
LLAMA = "models/exported/llama_op17_ts"


def dims_of(vi):
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in vi.type.tensor_type.shape.dim]


def matched(report_path):
    rep = json.load(open(report_path))
    return {p["name"]: p["matched"] for p in rep["patterns"]}


def gelu_model(path):
    """Y = gelu_erf(X @ W - 3): pre-activations near -3, where the tanh form is ~10% off."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((8, 8)) * 0.01).astype(np.float32), "w")
    b = numpy_helper.from_array(np.full((8,), -3.0, np.float32), "b")
    c = {n: numpy_helper.from_array(np.array(v, np.float32), n)
         for n, v in (("sqrt2", 1.4142135381698608), ("one", 1.0), ("half", 0.5))}
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["h", "e1"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["y"]),
    ]
    g = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 8])],
                          [w, b, *c.values()])
    helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    import onnx
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def resize_model(path):
    """Resize by constant scales [1, 1, 2, 2] after an Add (scales must stay float32)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    bias = numpy_helper.from_array(np.full((1, 2, 1, 1), 0.5, np.float32), "bias")
    nodes = [helper.make_node("Add", ["x", "bias"], ["a"]),
             helper.make_node("Resize", ["a", "", "scales"], ["y"], mode="nearest")]
    g = helper.make_graph(nodes, "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 6])], [scales, bias])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def ort_rel_errors(model_path, model_dir):
    """Norm-wise relative error of ONNX Runtime CPU on model_path against test_data_set_0."""
    import numpy as np
    import onnxruntime as ort
    inputs, refs = lib.load_test_data(model_dir)
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    feeds = {}
    for i, a in zip(sess.get_inputs(), inputs):
        feeds[i.name] = a.astype(np.float16) if i.type == "tensor(float16)" else a
    outs = sess.run(None, feeds)
    errs = []
    for o, r in zip(outs, refs):
        o = o.astype(np.float64)
        r = np.asarray(r, np.float64)
        errs.append(float(np.linalg.norm(o - r) / max(np.linalg.norm(r), 1e-30)))
    return errs


def main():
    args = lib.parse_args()
    bert = os.path.join(args.src, BERT, "model.onnx")
    llama = os.path.join(args.src, LLAMA, "model.onnx")
    if not os.path.exists(bert):
        print(f"SKIP: {BERT} is missing")
        return lib.SKIP
    try:
        import numpy as np  # noqa: F401
        import onnx
        import onnxruntime  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e}")
        return lib.SKIP
    failures = []
    expect = lib.expecter(failures)

    def one_error_line(r):
        lines = r.stderr.strip().splitlines()
        return r.returncode != 0 and len(lines) == 1 and lines[0].startswith("fuseopt: error: ")

    have_llama = os.path.exists(llama)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.onnx")
        rep = os.path.join(tmp, "rep.json")
        rep_dyn = os.path.join(tmp, "rep_dyn.json")

        # ---- --input-shape
        r = lib.run_fuseopt(args.bin, bert, out, "-q", "--report", rep_dyn)
        expect(r.returncode == 0, f"BERT dynamic run exits 0 ({r.stderr.strip()})")
        dyn = matched(rep_dyn)
        for flags, want in ((["--input-shape", "batch=1", "--input-shape", "seq=16"], [1, 16]),
                            (["--input-shape", "input_ids=2x64"], [2, 64])):
            r = lib.run_fuseopt(args.bin, bert, out, "-q", "--report", rep, *flags)
            expect(r.returncode == 0, f"BERT {' '.join(flags)} exits 0 ({r.stderr.strip()})")
            if r.returncode:
                continue
            m = onnx.load(out)
            expect(all(dims_of(i) == want for i in m.graph.input),
                   f"BERT {' '.join(flags)}: every input is declared {want} ({[dims_of(i) for i in m.graph.input]})")
            expect(matched(rep) == dyn, f"BERT {' '.join(flags)}: the fusions match as on the dynamic model "
                                        f"({matched(rep)} vs {dyn})")
        if have_llama:
            r = lib.run_fuseopt(args.bin, llama, out, "-q", "--report", rep_dyn)
            dyn = matched(rep_dyn)
            r = lib.run_fuseopt(args.bin, llama, out, "-q", "--report", rep, "--input-shape", "batch=1",
                                "--input-shape", "seq=128", "--check", "1")
            expect(r.returncode == 0, f"Llama --input-shape batch=1 seq=128 --check 1 exits 0 ({r.stderr.strip()})")
            if r.returncode == 0:
                expect(matched(rep) == dyn, f"Llama 1x128: the fusions match as on the dynamic model "
                                            f"({matched(rep)} vs {dyn})")
                expect(all(dims_of(i) == [1, 128] for i in onnx.load(out).graph.input), "Llama inputs are [1, 128]")

        # ---- bad values: one line, non-zero exit, no output file
        bad = [
            (["--input-shape", "nosuch=1x16"], "no input or symbolic dim 'nosuch'"),
            (["--input-shape", "input_ids=1x16x4"], "rank"),
            (["--input-shape", "input_ids=0x16"], "at least 1"),
            (["--input-shape", "seq=0"], "at least 1"),
            (["--input-shape", "seq=-4"], "dims must look like"),
            (["--input-shape", "seq=abc"], "dims must look like"),
            (["--input-shape", "seq"], "expected NAME=DIMS"),
            (["--input-shape", "seq=1x2"], "takes one number"),
            (["--input-shape", "input_ids=1x16", "--input-shape", "attention_mask=1x8"], "is already"),
            (["--check", "abc"], "--check abc"),
            (["--check", "0"], "--check 0"),
            (["--keep-io-types"], "--fp16"),
        ]
        for flags, text in bad:
            if os.path.exists(out):
                os.remove(out)
            r = lib.run_fuseopt(args.bin, bert, out, *flags)
            expect(one_error_line(r) and text in r.stderr and not os.path.exists(out),
                   f"{' '.join(flags)}: one error line naming it, no output ({r.returncode}: {r.stderr.strip()})")

        # ---- --check
        r = lib.run_fuseopt(args.bin, bert, out, "--input-shape", "seq=16", "--check")
        expect(r.returncode == 0 and "check: 3 random inputs" in r.stdout and os.path.exists(out),
               f"--check (default 3) passes on BERT ({r.stderr.strip()})")
        r = lib.run_fuseopt(args.bin, "--check", bert, out, "-q", "--input-shape", "seq=16")
        expect(r.returncode == 0 and r.stdout == "", f"a bare --check before the positionals ({r.stderr.strip()})")
        r = lib.run_fuseopt(args.bin, bert, out, "--check", "2", "--input-shape", "seq=16")
        expect(r.returncode == 0 and "check: 2 random inputs" in r.stdout, f"--check 2 ({r.stderr.strip()})")
        os.remove(out)
        r = lib.run_fuseopt(args.bin, bert, out, "-q", "--check", "1")  # seq defaults to 128 > 64 positions
        expect(one_error_line(r) and "--input-shape" in r.stderr and not os.path.exists(out),
               f"--check where the defaulted dims do not fit the model: one line with a hint ({r.stderr.strip()})")
        gelu = os.path.join(tmp, "gelu.onnx")
        gelu_model(gelu)
        r = lib.run_fuseopt(args.bin, gelu, out, "-q", "--check")
        expect(r.returncode == 0, f"--check passes on the erf GELU model ({r.stderr.strip()})")
        os.remove(out)
        rep_gelu = os.path.join(tmp, "gelu_report.json")
        r = lib.run_fuseopt(args.bin, gelu, out, "--approximate-gelu", "--check", "--report", rep_gelu)
        expect(one_error_line(r) and "output 'y'" in r.stderr and "rel err" in r.stderr and not os.path.exists(out)
               and not os.path.exists(rep_gelu),
               f"--check fails on a mismatch: one line naming the output and the error, nothing written "
               f"({r.returncode}: {r.stderr.strip()})")

        # ---- --fp16
        models = [(BERT, bert)] + ([(LLAMA, llama)] if have_llama else [])
        for rel, path in models:
            name = os.path.basename(rel)
            for keep in (False, True):
                o16 = os.path.join(tmp, f"{name}{'_keep' if keep else ''}.fp16.onnx")
                flags = ["--fp16"] + (["--keep-io-types"] if keep else [])
                r = lib.run_fuseopt(args.bin, path, o16, "-q", *flags)
                what = f"{name} {' '.join(flags)}"
                expect(r.returncode == 0, f"{what} exits 0 ({r.stderr.strip()})")
                if r.returncode:
                    continue
                m = onnx.load(o16)
                try:
                    onnx.checker.check_model(m, full_check=True)
                    ok = True
                except Exception as e:  # noqa: BLE001
                    ok = False
                    print(e)
                expect(ok, f"{what}: onnx.checker full check")
                io = {t.type.tensor_type.elem_type for t in list(m.graph.input) + list(m.graph.output)} - {7}
                want = {onnx.TensorProto.FLOAT} if keep else {onnx.TensorProto.FLOAT16}
                expect(io == want, f"{what}: float I/O is {'float32' if keep else 'float16'} ({io})")
                floats = [t for t in m.graph.initializer if len(t.dims) >= 2 and t.data_type in (1, 10)]
                expect(floats and all(t.data_type == onnx.TensorProto.FLOAT16 for t in floats),
                       f"{what}: weights are float16")
                errs = ort_rel_errors(o16, os.path.join(args.src, rel))
                expect(max(errs) <= 1e-2, f"{what}: ONNX Runtime CPU within 1e-2 of the fp32 references ({errs})")
                fr = subprocess.run([os.path.join(args.bin, "fuserun"), o16, "--backend", "cpu", "--check",
                                     os.path.join(args.src, rel, "test_data_set_0"), "-q"],
                                    capture_output=True, text=True, timeout=600)
                expect(fr.returncode == 0 and "check: PASS" in fr.stdout,
                       f"{what}: fuserun --backend cpu --check passes ({fr.stderr.strip()[:200]})")
        r = lib.run_fuseopt(args.bin, bert, out, "-q", "--fp16", "--check", "--input-shape", "seq=16")
        expect(r.returncode == 0, f"--fp16 --check passes at 1e-2 ({r.stderr.strip()})")

        # Unfused standard LayerNormalization / Softmax compute in fp32.
        o16 = os.path.join(tmp, "bert_none.fp16.onnx")
        r = lib.run_fuseopt(args.bin, bert, o16, "-q", "--fp16", "--passes", "none")
        expect(r.returncode == 0, f"--fp16 --passes none exits 0 ({r.stderr.strip()})")
        if r.returncode == 0:
            m = onnx.load(o16)
            onnx.checker.check_model(m, full_check=True)
            prod = {o: n for n in m.graph.node for o in n.output}
            cons = {}
            for n in m.graph.node:
                for i in n.input:
                    cons.setdefault(i, []).append(n)
            island = [n for n in m.graph.node if n.op_type in ("LayerNormalization", "Softmax")]
            ok = bool(island)
            for n in island:
                x = prod.get(n.input[0])
                ok = ok and x is not None and x.op_type == "Cast" and x.attribute[0].i == onnx.TensorProto.FLOAT
                ok = ok and all(c.op_type == "Cast" and c.attribute[0].i == onnx.TensorProto.FLOAT16
                                for c in cons.get(n.output[0], []))
            expect(ok, f"unfused LayerNormalization/Softmax ({len(island)}) read a Cast to FLOAT and are read "
                       "through a Cast to FLOAT16")
            errs = ort_rel_errors(o16, os.path.join(args.src, BERT))
            expect(max(errs) <= 1e-2, f"--fp16 --passes none: ONNX Runtime within 1e-2 ({errs})")

        # Resize's scales stay float32 (a shape-setting parameter, as in the runtime).
        rz = os.path.join(tmp, "resize.onnx")
        resize_model(rz)
        o16 = os.path.join(tmp, "resize.fp16.onnx")
        r = lib.run_fuseopt(args.bin, rz, o16, "-q", "--fp16", "--check")
        expect(r.returncode == 0, f"Resize model --fp16 --check ({r.stderr.strip()})")
        if r.returncode == 0:
            m = onnx.load(o16)
            onnx.checker.check_model(m, full_check=True)
            types = {t.name: t.data_type for t in m.graph.initializer}
            expect(types.get("scales") == onnx.TensorProto.FLOAT and types.get("bias") == onnx.TensorProto.FLOAT16,
                   f"Resize scales stay float32, other constants become float16 ({types})")
            import numpy as np
            import onnxruntime as ort
            x = np.random.default_rng(1).standard_normal((1, 2, 3, 3)).astype(np.float32)
            y16 = ort.InferenceSession(o16, providers=["CPUExecutionProvider"]).run(None, {"x": x.astype(np.float16)})[0]
            y32 = ort.InferenceSession(rz, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
            expect(y16.shape == y32.shape and np.abs(y16.astype(np.float32) - y32).max() < 1e-2,
                   "the fp16 Resize model runs in ONNX Runtime like the original")

        # ---- progress line
        env = dict(os.environ, FUSEOPT_PROGRESS_AFTER_S="0")
        exe = os.path.join(args.bin, "fuseopt")
        r = subprocess.run([exe, bert, out], capture_output=True, text=True, env=env, timeout=600)
        lines = r.stderr.splitlines()
        expect(r.returncode == 0 and any(l.startswith("fuseopt: pass 1/") for l in lines)
               and any("Attention" in l for l in lines) and all(l.startswith("fuseopt: ") for l in lines)
               and "\r" not in r.stderr,
               f"progress off a terminal: one line per step ({len(lines)} lines)")
        r = subprocess.run([exe, bert, out, "-q"], capture_output=True, text=True, env=env, timeout=600)
        expect(r.returncode == 0 and r.stderr == "" and r.stdout == "", "-q: no progress line")
        r = lib.run_fuseopt(args.bin, bert, out)
        expect(r.returncode == 0 and r.stderr == "", "a run under 2 s shows no progress line")
        try:
            import pty
            master, slave = pty.openpty()
            p = subprocess.Popen([exe, bert, out], stdout=subprocess.DEVNULL, stderr=slave, env=env)
            os.close(slave)
            chunks = []
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
            p.wait(timeout=600)
            os.close(master)
            text = b"".join(chunks).decode(errors="replace")
            expect(p.returncode == 0 and "\rfuseopt: pass " in text and "\x1b[K" in text,
                   "progress on a terminal: rewritten in place (carriage return, erase to end of line)")
        except (ImportError, OSError) as e:
            print(f"note: no pty ({e}); the terminal form is not checked")

    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
