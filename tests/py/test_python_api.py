"""The Python API (import fuseopt): optimize, Report, InferenceSession.

pytest tests (CPU). ctest runs this file as
`python3 test_python_api.py --bin BUILD/bin --src REPO` with PYTHONPATH=BUILD/python.
The CUDA and DLPack tests are in test_python_api_cuda.py.
Run directly: PYTHONPATH=build/python python3 -m pytest -rs tests/py/test_python_api.py
"""
import json
import os
import re
import subprocess
import sys
import threading
import time


if __name__ == "__main__":  # ctest; pytest imports this file again as a module
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _fuseopt_testlib
    sys.exit(_fuseopt_testlib.run_pytest_file(__file__))

import numpy as np  # noqa: E402  (after the ctest entry point, which needs neither)
import pytest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FUSEOPT_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
BIN = os.environ.get("FUSEOPT_BIN_DIR", os.path.join(SRC, "build", "bin"))
MODEL_DIR = os.path.join(SRC, "models", "real", "bert_eager_op17_ts")
MODEL = os.path.join(MODEL_DIR, "model.onnx")

fuseopt = pytest.importorskip("fuseopt")
onnx = pytest.importorskip("onnx")

CUDA_OK, CUDA_WHY = fuseopt.cuda_available()


def reference():
    """(feeds by name, expected outputs) from the model's test_data_set_0."""
    from onnx import numpy_helper
    data = os.path.join(MODEL_DIR, "test_data_set_0")
    m = onnx.load(MODEL, load_external_data=False)
    names = [i.name for i in m.graph.input]

    def read(prefix):
        out, i = [], 0
        while os.path.exists(os.path.join(data, f"{prefix}_{i}.pb")):
            out.append(numpy_helper.to_array(onnx.load_tensor(os.path.join(data, f"{prefix}_{i}.pb"))))
            i += 1
        return out

    return dict(zip(names, read("input"))), read("output")


def rel_err(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    assert not np.isnan(got).any()
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


def cli(*args):
    return subprocess.run([os.path.join(BIN, "fuseopt"), *args], capture_output=True, text=True, timeout=300)


def cli_error(*args):
    """The message the CLI prints after 'fuseopt: error: '."""
    r = cli(*args)
    assert r.returncode != 0
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("fuseopt: error: "), line
    return line[len("fuseopt: error: "):]


@pytest.fixture(scope="module")
def optimized():
    return fuseopt.optimize(MODEL)


# ------------------------------------------------------------------ optimize

def test_optimize_from_path(optimized):
    model, report = optimized
    assert isinstance(model, onnx.ModelProto)
    onnx.checker.check_model(model, full_check=True)
    assert report.nodes_before == 251
    assert report.nodes_after < report.nodes_before
    assert report.matched["Attention"] == 2
    assert report.ops_after["fuseopt.Attention"] == 2
    assert report.ops_before.get("Softmax") == 2 and "Softmax" not in report.ops_after
    fused = [n for n in model.graph.node if n.domain == "fuseopt"]
    assert len(fused) == sum(v for k, v in report.ops_after.items() if k.startswith("fuseopt."))
    assert {f.name for f in model.functions} >= {n.op_type for n in fused}  # function bodies written


def test_optimize_from_modelproto_equals_path(optimized):
    with open(MODEL, "rb") as f:
        data = f.read()
    for source in (onnx.load(MODEL), data):  # a ModelProto, or its bytes
        model, report = fuseopt.optimize(source)
        assert model.SerializeToString(deterministic=True) == optimized[0].SerializeToString(deterministic=True)
        assert report.ops_after == optimized[1].ops_after
        assert report.matched == optimized[1].matched


def test_report_contents(optimized):
    _, report = optimized
    names = [p.name for p in report.patterns]
    assert "Attention" in names and "LayerNormLinear" in names
    assert report.matched["FusedMatMulLayerNorm"] == 4  # each layer's two post-LN residual norms
    # Rejections with their reasons: without FusedMatMulLayerNorm the post-LN SkipLayerNorms stay,
    # and LayerNormLinear refuses them (rule 1: the next residual Add reads the norm's output too).
    _, unfused = fuseopt.optimize(MODEL, disable=["FusedMatMulLayerNorm"])
    lnl = unfused.pattern("LayerNormLinear")
    assert lnl.rejected == len(lnl.reasons) > 0
    assert any("rule 1" in r for r in lnl.reasons)
    assert unfused.rejected["LayerNormLinear"] == lnl.reasons
    assert report.pattern("NoSuchPattern") is None
    cats = {p.name: p.category for p in report.passes}
    assert cats["const_fold"] == "cleanup" and cats["Attention"] == "fusion"
    att = next(p for p in report.passes if p.name == "Attention")
    assert att.rewrites >= 1 and att.runs >= 1 and att.nodes_erased > 0 and att.millis >= 0
    assert report.iterations >= 1 and report.fixed_point


def test_report_json(optimized, tmp_path):
    _, report = optimized
    js = json.loads(report.to_json())
    assert js["nodes_before"] == report.nodes_before and js["nodes_after"] == report.nodes_after
    assert js["ops_after"] == report.ops_after
    pats = {p["name"]: p for p in js["patterns"]}
    assert pats["Attention"]["matched"] == 2
    assert pats["LayerNormLinear"]["reasons"] == report.pattern("LayerNormLinear").reasons
    # The same figures as fuseopt --report writes (times and file names aside).
    out = tmp_path / "out.onnx"
    rep = tmp_path / "report.json"
    assert cli(MODEL, str(out), "--report", str(rep), "-q").returncode == 0
    want = json.loads(rep.read_text())
    for k in ("nodes_before", "nodes_after", "ops_before", "ops_after", "patterns", "iterations", "fixed_point"):
        assert js[k] == want[k], k


def test_report_str_is_the_cli_table(optimized, tmp_path):
    _, report = optimized
    r = cli(MODEL, str(tmp_path / "out.onnx"))
    assert r.returncode == 0
    ms = re.compile(r" +\d+\.\d\d$", re.M)  # per-pass times (the last column, right-aligned) differ

    def body(table):  # the CLI's first line names both files, ours the input only
        lines = table.splitlines()
        assert lines[0].startswith("model: " + MODEL)
        return ms.sub(" T", "\n".join(lines[1:]))

    assert str(report) == report.to_table()
    assert body(str(report)) == body(r.stdout)
    assert "fusion" in str(report) and "matched" in str(report)
    assert len(report.to_table(verbose=True)) >= len(str(report))


def test_passes_and_disable():
    _, none = fuseopt.optimize(MODEL, passes=[])
    assert none.nodes_after == none.nodes_before == 251 and none.passes == []
    _, cleanup = fuseopt.optimize(MODEL, passes="cleanup")
    assert not any(k.startswith("fuseopt.") for k in cleanup.ops_after)
    _, no_att = fuseopt.optimize(MODEL, disable=["Attention"])
    assert "fuseopt.Attention" not in no_att.ops_after and no_att.ops_after.get("Softmax") == 2
    _, both = fuseopt.optimize(MODEL, passes="cleanup,FusedMatMul")
    assert set(k for k in both.ops_after if k.startswith("fuseopt.")) == {"fuseopt.FusedMatMul"}
    assert [p["name"] for p in fuseopt.list_passes()][:1] == ["const_fold"]


def test_approximate_gelu():
    model, _ = fuseopt.optimize(MODEL, approximate_gelu=True)
    acts = {a.s.decode() for n in model.graph.node if n.op_type == "FusedMatMul" for a in n.attribute
            if a.name == "activation"}
    assert "gelu_tanh" in acts
    model, _ = fuseopt.optimize(MODEL)
    acts = {a.s.decode() for n in model.graph.node if n.op_type == "FusedMatMul" for a in n.attribute
            if a.name == "activation"}
    assert "gelu_tanh" not in acts


def test_emit_standard(tmp_path):
    """emit="standard" writes what fuseopt --emit standard writes."""
    model, report = fuseopt.optimize(MODEL, emit="standard")
    out = tmp_path / "std.onnx"
    assert cli(MODEL, str(out), "--emit", "standard", "-q").returncode == 0
    want = onnx.load(str(out))
    assert list(model.graph.node) == list(want.graph.node)
    assert list(model.opset_import) == list(want.opset_import)
    assert report.emit_mode == "standard" and report.emit_opset_after >= report.emit_opset_before
    assert {e.op for e in report.emit_ops} >= {"Attention"}
    att = next(e for e in report.emit_ops if e.op == "Attention")
    assert att.standard_as == "Attention" and att.standard + att.fuseopt == report.matched["Attention"]
    onnx.checker.check_model(model, full_check=True)
    _, plain = fuseopt.optimize(MODEL)
    assert plain.emit_mode == "" and plain.emit_ops == []
    with pytest.raises(fuseopt.Error) as e:
        fuseopt.optimize(MODEL, emit="nope")
    assert str(e.value) == cli_error(MODEL, str(tmp_path / "o.onnx"), "--emit", "nope")
    # No fusion with a standard form: the CLI's one line, as an exception.
    resnet = os.path.join(SRC, "models", "real", "resnet_tiny_op17_ts", "model.onnx")
    with pytest.raises(fuseopt.Error, match="none of the 3 fused ops has an exact standard ONNX form") as e:
        fuseopt.optimize(resnet, emit="standard")
    assert str(e.value) == cli_error(resnet, str(tmp_path / "r.onnx"), "--emit", "standard")
    assert not (tmp_path / "r.onnx").exists()


def test_input_shapes_and_fp16(tmp_path):
    """input_shapes / fp16 / keep_io_types write what --input-shape / --fp16 / --keep-io-types write."""
    model, _ = fuseopt.optimize(MODEL, input_shapes={"input_ids": (2, 16)}, fp16=True)
    out = tmp_path / "h.onnx"
    assert cli(MODEL, str(out), "--input-shape", "input_ids=2x16", "--fp16", "-q").returncode == 0
    want = onnx.load(str(out))
    assert list(model.graph.node) == list(want.graph.node)
    assert list(model.graph.input) == list(want.graph.input) and list(model.graph.output) == list(want.graph.output)
    dims = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input]
    assert dims == [[2, 16]] * 3
    assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    feeds, ref = reference()
    (got,) = fuseopt.InferenceSession(model, backend="cpu").run(None, feeds)
    assert got.dtype == np.float16 and rel_err(got, ref[0]) < 1e-2
    kept, _ = fuseopt.optimize(MODEL, input_shapes=["batch=2", "seq=16"], fp16=True, keep_io_types=True)
    assert kept.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    (got,) = fuseopt.InferenceSession(kept, backend="cpu").run(None, feeds)
    assert got.dtype == np.float32 and rel_err(got, ref[0]) < 1e-2
    with pytest.raises(fuseopt.Error, match="^input_shapes nope=1x2: the model has no input or symbolic dim 'nope'"):
        fuseopt.optimize(MODEL, input_shapes={"nope": (1, 2)})
    with pytest.raises(fuseopt.Error, match="^input_shapes input_ids=3x16: 'batch' is already 2$"):
        fuseopt.optimize(MODEL, input_shapes={"batch": 2, "input_ids": "3x16"})
    with pytest.raises(fuseopt.Error, match="^keep_io_types only applies with fp16=True$"):
        fuseopt.optimize(MODEL, keep_io_types=True)


def test_external_data_path(tmp_path):
    m = onnx.load(MODEL)
    path = tmp_path / "ext.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.onnx.data", size_threshold=1024)
    assert (tmp_path / "ext.onnx.data").stat().st_size > 1_000_000
    model, report = fuseopt.optimize(str(path))
    assert report.matched["Attention"] == 2
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
    feeds, want = reference()
    (got,) = fuseopt.InferenceSession(path, backend="cpu").run(None, feeds)  # a PathLike works too
    assert rel_err(got, want[0]) < 1e-4
    # A ModelProto whose external data was not loaded cannot be serialized across.
    unloaded = onnx.load(str(path), load_external_data=False)
    with pytest.raises(fuseopt.Error, match="external file that is not loaded; pass the model's path"):
        fuseopt.optimize(unloaded)


def test_large_result_comes_back_through_external_data(optimized, monkeypatch):
    """Optimized weights over 1.8 GiB cannot be one protobuf: they come back through a temporary
    model with external data, loaded into the ModelProto (the threshold lowered to test it)."""
    real = fuseopt._fuseopt.OptimizeArgs

    def small_threshold():
        a = real()
        a.external_data_over = 1024
        return a

    from onnx import numpy_helper
    monkeypatch.setattr(fuseopt._fuseopt, "OptimizeArgs", small_threshold)
    for source in (MODEL, onnx.load(MODEL)):
        model, report = fuseopt.optimize(source)
        assert report.matched == optimized[1].matched
        assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
        want = optimized[0]
        assert list(model.graph.node) == list(want.graph.node) and list(model.functions) == list(want.functions)
        got_w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        want_w = {t.name: numpy_helper.to_array(t) for t in want.graph.initializer}
        assert got_w.keys() == want_w.keys()
        for k, v in want_w.items():
            np.testing.assert_array_equal(got_w[k], v)


def test_modelproto_over_2gib_is_refused():
    class Huge:  # stands in for a ModelProto with 3 GiB of weights in memory
        graph = None

        def ByteSize(self):
            return 3 << 30

        def SerializeToString(self):
            raise AssertionError("must not be called")

    with pytest.raises(fuseopt.Error, match=r"3\.00 GiB is over protobuf's 2 GiB limit.*save_as_external_data"):
        fuseopt.optimize(Huge())
    with pytest.raises(TypeError, match="a path, an onnx.ModelProto or its bytes"):
        fuseopt.optimize(42)


def test_errors_are_the_cli_messages(tmp_path):
    missing = str(tmp_path / "missing.onnx")
    with pytest.raises(fuseopt.Error) as e:
        fuseopt.optimize(missing)
    assert str(e.value) == cli_error(missing, str(tmp_path / "o.onnx")) == f"{missing}: no such file"
    assert isinstance(e.value, RuntimeError) and type(e.value).__module__ == "fuseopt"

    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x01 this is not a model \xff\xfe")
    with pytest.raises(fuseopt.Error) as e:
        fuseopt.optimize(str(junk))
    assert str(e.value) == cli_error(str(junk), str(tmp_path / "o.onnx"))
    assert "not a valid ONNX model" in str(e.value)

    with pytest.raises(fuseopt.Error) as e:
        fuseopt.optimize(MODEL, passes=["NoSuchPass"])
    assert str(e.value) == cli_error(MODEL, str(tmp_path / "o.onnx"), "--passes", "NoSuchPass")
    assert "NoSuchPass" in str(e.value)

    with pytest.raises(fuseopt.Error, match="no such file"):
        fuseopt.InferenceSession(missing, backend="cpu")


# ------------------------------------------------------------ InferenceSession

def test_session_cpu_matches_reference(optimized):
    feeds, want = reference()
    # The original (path), the optimized ModelProto and its bytes.
    for model in (MODEL, optimized[0], optimized[0].SerializeToString()):
        sess = fuseopt.InferenceSession(model, backend="cpu")
        assert sess.backend == "cpu" and sess.precision == "fp32"
        outs = sess.run(None, feeds)
        assert isinstance(outs, list) and len(outs) == 1
        assert isinstance(outs[0], np.ndarray) and outs[0].dtype == np.float32
        assert outs[0].shape == (2, 16, 128)
        assert rel_err(outs[0], want[0]) < 1e-4
        (named,) = sess.run(["out"], feeds)
        np.testing.assert_array_equal(named, outs[0])
        a, b = sess.run(["out", "out"], feeds)  # two arrays, not one moved-from
        np.testing.assert_array_equal(a, outs[0])
        np.testing.assert_array_equal(b, outs[0])
        assert not np.shares_memory(a, b)


def test_session_feeds_dlpack_and_non_contiguous(optimized):
    feeds, want = reference()
    sess = fuseopt.InferenceSession(optimized[0], backend="cpu")
    (base,) = sess.run(None, feeds)

    class DLPackOnly:  # any object with the DLPack protocol, not a numpy array
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    (via_dlpack,) = sess.run(None, {k: DLPackOnly(v) for k, v in feeds.items()})
    np.testing.assert_array_equal(via_dlpack, base)

    class OnCuda(DLPackOnly):  # what a CUDA tensor says it is
        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(fuseopt.Error, match="^input 'input_ids': a CUDA tensor cannot feed a session on the cpu "
                                            "backend; pass tensor.cpu"):
        sess.run(None, dict(feeds, input_ids=OnCuda(feeds["input_ids"])))
    # Fortran-ordered and strided views are made contiguous.
    strided = {k: np.repeat(v, 2, axis=1)[:, ::2] for k, v in feeds.items()}
    assert not strided["input_ids"].flags.c_contiguous
    (via_strided,) = sess.run(None, strided)
    np.testing.assert_array_equal(via_strided, base)
    # A batch of 1 and another sequence length bind the symbolic dims afresh.
    small = {k: np.ascontiguousarray(v[:1, :7]) for k, v in feeds.items()}
    (one,) = sess.run(None, small)
    assert one.shape == (1, 7, 128)
    try:
        import torch  # optional: a CPU torch tensor through DLPack
    except ImportError:
        return
    (via_torch,) = sess.run(None, {k: torch.from_numpy(v) for k, v in feeds.items()})
    np.testing.assert_array_equal(via_torch, base)


def test_session_feed_errors(optimized):
    feeds, _ = reference()
    sess = fuseopt.InferenceSession(MODEL, backend="cpu")
    bad = dict(feeds, nope=feeds["input_ids"])
    with pytest.raises(fuseopt.Error) as e:
        sess.run(None, bad)
    assert str(e.value) == ("unknown input 'nope' (the model's inputs are: attention_mask, input_ids, "
                            "token_type_ids)")
    with pytest.raises(fuseopt.Error, match="^missing input 'token_type_ids'$"):
        sess.run(None, {k: v for k, v in feeds.items() if k != "token_type_ids"})
    with pytest.raises(fuseopt.Error, match="^input 'input_ids' is int32 but the model declares int64$"):
        sess.run(None, dict(feeds, input_ids=feeds["input_ids"].astype(np.int32)))
    with pytest.raises(fuseopt.Error, match=r"^input 'attention_mask' has seq = 8 but input 'input_ids' has seq"):
        sess.run(None, dict(feeds, attention_mask=np.ascontiguousarray(feeds["attention_mask"][:, :8])))
    with pytest.raises(fuseopt.Error, match="numpy dtype complex64 is not a tensor type"):
        sess.run(None, dict(feeds, input_ids=feeds["input_ids"].astype(np.complex64)))
    with pytest.raises(fuseopt.Error, match=r"^unknown output 'logits' \(the model's outputs are: out\)$"):
        sess.run(["logits"], feeds)
    with pytest.raises(TypeError, match="input_feed must be a dict"):
        sess.run(None, [feeds["input_ids"]])


def test_session_option_errors():
    with pytest.raises(fuseopt.Error, match="^backend tpu: expected cuda or cpu$"):
        fuseopt.InferenceSession(MODEL, backend="tpu")
    with pytest.raises(fuseopt.Error, match="^precision fp8: expected fp32, tf32, fp16 or bf16$"):
        fuseopt.InferenceSession(MODEL, backend="cpu", precision="fp8")
    with pytest.raises(fuseopt.Error, match="fp16"):
        fuseopt.InferenceSession(MODEL, backend="cpu", precision="fp16")
    if not CUDA_OK:
        with pytest.raises(fuseopt.Error, match="^backend cuda: "):
            fuseopt.InferenceSession(MODEL, backend="cuda")
        assert fuseopt.InferenceSession(MODEL).backend == "cpu"  # the default without a GPU


def test_get_inputs_outputs():
    sess = fuseopt.InferenceSession(MODEL, backend="cpu")
    ins = sess.get_inputs()
    assert [i.name for i in ins] == ["input_ids", "attention_mask", "token_type_ids"]
    assert all(i.type == "tensor(int64)" and i.shape == ["batch", "seq"] for i in ins)
    (out,) = sess.get_outputs()
    assert (out.name, out.type, out.shape) == ("out", "tensor(float)", ["batch", "seq", 128])
    assert "input_ids" in repr(ins[0])


def test_profile(optimized):
    feeds, _ = reference()
    sess = fuseopt.InferenceSession(optimized[0], backend="cpu", profile=True)
    sess.run(None, feeds)
    sess.run(None, feeds)
    p = sess.profile()
    assert p["enabled"] and p["backend"] == "cpu" and p["runs"] == 2
    ops = {o["op"]: o for o in p["by_op_type"]}
    assert ops["fuseopt.Attention"]["nodes"] == 2 and ops["fuseopt.Attention"]["calls"] == 4
    assert all(o["total_ms"] >= 0 for o in p["by_op_type"])
    assert len(p["nodes"]) == sum(o["nodes"] for o in p["by_op_type"])
    times = [n["total_ms"] for n in p["nodes"]]
    assert times == sorted(times, reverse=True)
    json.dumps(p)  # plain Python values only
    sess.profile(reset=True)
    assert sess.profile()["runs"] == 0
    plain = fuseopt.InferenceSession(optimized[0], backend="cpu")
    plain.run(None, feeds)
    assert plain.profile()["enabled"] is False and plain.profile()["runs"] == 1


def test_gil_released_while_running():
    """While run() computes, another Python thread keeps running: its clock readings
    leave no gap spanning the run (with the GIL held there would be one as long as the run)."""
    sess = fuseopt.InferenceSession(MODEL, backend="cpu", threads=1)
    feeds = {"input_ids": np.tile(np.arange(100, 164, dtype=np.int64), (16, 1)),
             "attention_mask": np.ones((16, 64), np.int64), "token_type_ids": np.zeros((16, 64), np.int64)}
    sess.run(None, feeds)  # warm up
    spans, stamps, done = [], [], threading.Event()

    def work():
        try:
            for _ in range(3):
                t0 = time.perf_counter()
                sess.run(None, feeds)
                spans.append((t0, time.perf_counter()))
        finally:
            done.set()

    def tick():
        while not done.is_set():
            stamps.append(time.perf_counter())

    threads = [threading.Thread(target=work), threading.Thread(target=tick)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(spans) == 3
    gaps = []
    for t0, t1 in spans:
        inside = [t0] + [s for s in stamps if t0 < s < t1] + [t1]
        gaps.append((max(b - a for a, b in zip(inside, inside[1:])), t1 - t0))
    # The best of three runs (a loaded machine may deschedule the ticking thread now and then).
    gap, span = min(gaps, key=lambda g: g[0] / g[1])
    assert gap < 0.5 * span, f"no Python ran for {gap * 1e3:.1f} of {span * 1e3:.1f} ms"
