"""The Python API with DLPack tensors: CUDA tensors in and out of fuseopt.InferenceSession.

pytest tests. ctest runs this file as `python3 test_python_api_cuda.py --bin BUILD/bin --src REPO`
with PYTHONPATH=BUILD/python. The CPU tests (DLPack parsing, refusals on the CPU backend,
output_device checks) run everywhere; the CUDA tests skip with the reason when fuseopt has no
usable GPU or torch has no CUDA. On the GPU machine: .gpucmd/py_dlpack.sh.
"""
import gc
import os
import sys

if __name__ == "__main__":  # ctest; pytest imports this file again as a module
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _fuseopt_testlib
    sys.exit(_fuseopt_testlib.run_pytest_file(__file__))

import numpy as np  # noqa: E402
import pytest  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FUSEOPT_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
MODEL_DIR = os.path.join(SRC, "models", "real", "bert_eager_op17_ts")
MODEL = os.path.join(MODEL_DIR, "model.onnx")

fuseopt = pytest.importorskip("fuseopt")
onnx = pytest.importorskip("onnx")
from fuseopt import _fuseopt  # noqa: E402

CUDA_OK, CUDA_WHY = fuseopt.cuda_available()


def reference():
    """(feeds by name, expected outputs) from the model's test_data_set_0."""
    ins, outs = lib.load_test_data(MODEL_DIR)
    names = [i.name for i in onnx.load(MODEL, load_external_data=False).graph.input]
    return dict(zip(names, ins)), outs


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape and not np.isnan(got).any()
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


@pytest.fixture(scope="module")
def optimized():
    return fuseopt.optimize(MODEL)[0]


class Fake:
    """An object that says it lives on a device; its data must never be asked for."""

    def __init__(self, device):
        self.device = device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kw):
        raise AssertionError("__dlpack__ must not be called for a refused feed")


# ------------------------------------------------------------------------------ CPU

def test_cuda_feed_refused_on_the_cpu_backend():
    feeds, _ = reference()
    sess = fuseopt.InferenceSession(MODEL, backend="cpu")
    with pytest.raises(fuseopt.Error, match=r"^input 'input_ids': a CUDA tensor cannot feed a session on the cpu "
                                            r"backend; pass tensor.cpu\(\) or create the session with "
                                            r"backend='cuda'$"):
        sess.run(None, dict(feeds, input_ids=Fake((2, 0))))
    with pytest.raises(fuseopt.Error, match=r"^input 'input_ids': a DLPack tensor on device type 4 cannot be fed"):
        sess.run(None, dict(feeds, input_ids=Fake((4, 0))))


def test_output_device_on_the_cpu_backend():
    feeds, want = reference()
    sess = fuseopt.InferenceSession(MODEL, backend="cpu")
    (out,) = sess.run(None, feeds, output_device="cpu")
    assert isinstance(out, np.ndarray) and rel_err(out, want[0]) < 1e-4
    (same,) = sess.run(None, feeds)  # None follows the (host) feeds
    np.testing.assert_array_equal(same, out)
    for bad, message in (("cuda", "^output_device cuda: the session runs on the cpu backend$"),
                         ("cuda:0", "^output_device cuda:0: the session runs on the cpu backend$"),
                         ("tpu", "^output_device tpu: expected cpu, cuda or None$")):
        with pytest.raises(fuseopt.Error, match=message):
            sess.run(None, feeds, output_device=bad)
    with pytest.raises(TypeError, match="output_device must be"):
        sess.run(None, feeds, output_device=0)


def test_dlpack_capsules_are_parsed_checked_and_consumed():
    """The parser behind CUDA feeds, on host capsules (the test hook allows CPU memory)."""
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert _fuseopt._dlpack_view("x", a.__dlpack__()) == ("float32", [2, 3, 4], "cpu")
    assert _fuseopt._dlpack_view("x", np.zeros((5,), np.float16).__dlpack__())[0] == "float16"
    assert _fuseopt._dlpack_view("x", np.zeros((1, 2), np.int64).__dlpack__())[:2] == ("int64", [1, 2])
    # A size-1 dim may carry any stride; a real gap may not.
    odd = np.lib.stride_tricks.as_strided(a.reshape(-1), shape=(1, 4), strides=(400, 4))
    assert _fuseopt._dlpack_view("x", odd.__dlpack__())[1] == [1, 4]
    with pytest.raises(fuseopt.Error, match=r"^input 'x': the DLPack tensor is not contiguous \(shape \[4,3,2\], "
                                            r"strides \[1,4,12\] in elements\); pass a contiguous one"):
        _fuseopt._dlpack_view("x", a.T.__dlpack__())
    with pytest.raises(fuseopt.Error, match=r"^input 'z': DLPack dtype \(code 5, bits 64, lanes 1\) is not a "
                                            r"tensor type fuseopt can run$"):
        _fuseopt._dlpack_view("z", np.zeros(3, np.complex64).__dlpack__())
    cap = a.__dlpack__()
    _fuseopt._dlpack_view("x", cap)
    with pytest.raises(fuseopt.Error, match=r"^input 'x': __dlpack__\(\) gave a capsule named 'used_dltensor', "
                                            r"not an unconsumed 'dltensor'"):
        _fuseopt._dlpack_view("x", cap)
    # A refused capsule stays the producer's: numpy frees it (no leak, no double free).
    refused = a.T.__dlpack__()
    with pytest.raises(fuseopt.Error):
        _fuseopt._dlpack_view("x", refused)
    del refused
    gc.collect()


def test_device_array_is_read_once():
    arr = fuseopt.DeviceArray(np.zeros(2, np.float32).__dlpack__(), 0, "float32", (2,))
    assert arr.__dlpack_device__() == (2, 0) and arr.shape == (2,) and "float32[2] on cuda:0" in repr(arr)
    arr.__dlpack__(stream=None)
    with pytest.raises(BufferError, match="already read through DLPack"):
        arr.__dlpack__()


# ----------------------------------------------------------------------------- CUDA

@pytest.fixture(scope="module")
def torch_cuda():
    if not CUDA_OK:
        pytest.skip(f"no usable GPU for fuseopt: {CUDA_WHY}")
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    return torch


def memory_type(ptr):
    """(cudaMemoryType, device) of a pointer from the CUDA runtime fuseopt loaded (2 = device memory)."""
    import ctypes

    class Attributes(ctypes.Structure):  # cudaPointerAttributes (CUDA 10+)
        _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int), ("devicePointer", ctypes.c_void_p),
                    ("hostPointer", ctypes.c_void_p), ("reserved", ctypes.c_long * 8)]

    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            rt = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        pytest.fail("no libcudart to ask where the output lives")
    a = Attributes()
    assert rt.cudaPointerGetAttributes(ctypes.byref(a), ctypes.c_void_p(ptr)) == 0
    return a.type, a.device


def test_cuda_session_matches_reference(optimized):
    if not CUDA_OK:
        pytest.skip(f"no usable GPU: {CUDA_WHY}")
    feeds, want = reference()
    for precision, tol in (("fp32", 1e-4), ("tf32", 1e-2), ("fp16", 1e-2), ("bf16", 1e-2)):
        sess = fuseopt.InferenceSession(optimized, backend="cuda", precision=precision)
        assert sess.backend == "cuda"
        for _ in range(3):  # first run, captured run, replayed graph
            (got,) = sess.run(None, feeds)
            assert rel_err(got, want[0]) < tol, precision
    assert fuseopt.InferenceSession(MODEL).backend == "cuda"  # the default with a GPU


def test_cuda_profile(optimized):
    if not CUDA_OK:
        pytest.skip(f"no usable GPU: {CUDA_WHY}")
    feeds, _ = reference()
    sess = fuseopt.InferenceSession(optimized, backend="cuda", profile=True)
    sess.run(None, feeds)
    p = sess.profile()
    assert p["backend"] == "cuda" and p["runs"] == 1 and p["by_op_type"]
    assert p["input_upload_bytes"] == sum(v.nbytes for v in feeds.values()) and p["output_download_bytes"] > 0


def test_cuda_torch_tensor_round_trip_without_host_copy(optimized, torch_cuda):
    torch = torch_cuda
    feeds, _ = reference()
    (want,) = fuseopt.InferenceSession(optimized, backend="cpu").run(None, feeds)
    sess = fuseopt.InferenceSession(optimized, backend="cuda")
    dev = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
    in_ptrs = {t.data_ptr() for t in dev.values()}
    torch.cuda.synchronize()
    sess.profile(reset=True)
    outs = []
    for _ in range(3):  # first run, captured run, replayed graph
        (out,) = sess.run(None, dev)
        assert isinstance(out, torch.Tensor) and out.device.type == "cuda"
        assert out.device.index == sess._s.device_ordinal and out.dtype == torch.float32
        assert out.shape == (2, 16, 128) and out.is_contiguous()
        assert memory_type(out.data_ptr()) == (2, out.device.index)  # device memory, not pinned/managed host
        assert out.data_ptr() not in in_ptrs
        assert rel_err(out.cpu().numpy(), want) < 1e-4  # against the CPU backend on the same inputs
        outs.append(out)
    assert len({o.data_ptr() for o in outs}) == 3  # each run's output is its own memory
    p = sess.profile()
    assert p["input_upload_bytes"] == 0 and p["output_download_bytes"] == 0, p
    assert p["device_to_host_copies"] == 0, p["device_to_host_nodes"]
    assert p["graph_replays"] >= 1, p["capture_disabled_reason"]
    sess.run(None, feeds)  # the numpy path does copy: the counters above could have failed
    assert sess.profile()["input_upload_bytes"] > 0 and sess.profile()["output_download_bytes"] > 0
    # The outputs outlive the session; the memory is torch's to free.
    del sess
    gc.collect()
    assert rel_err(outs[0].cpu().numpy(), want) < 1e-4
    del outs
    gc.collect()
    torch.cuda.synchronize()


def test_cuda_feeds_written_on_another_stream(optimized, torch_cuda):
    """Inputs produced on a side stream right before run() are read after they are written
    (run() asks torch to order them before the session's stream)."""
    torch = torch_cuda
    feeds, want = reference()
    sess = fuseopt.InferenceSession(optimized, backend="cuda")
    side = torch.cuda.Stream()
    base = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
    torch.cuda.synchronize()
    for _ in range(3):
        with torch.cuda.stream(side):
            torch.cuda._sleep(2_000_000)  # a slow producer: the copies below land late
            dev = {k: v.clone() for k, v in base.items()}
            (out,) = sess.run(None, dev)
            # The output is complete on return: any stream may read it.
            assert rel_err(out.cpu().numpy(), want[0]) < 1e-4


def test_cuda_output_device_options(optimized, torch_cuda):
    torch = torch_cuda
    feeds, want = reference()
    sess = fuseopt.InferenceSession(optimized, backend="cuda")
    dev = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
    (host,) = sess.run(None, dev, output_device="cpu")  # device feeds, numpy out
    assert isinstance(host, np.ndarray) and rel_err(host, want[0]) < 1e-4
    (arr,) = sess.run(None, feeds, output_device="cuda")  # numpy feeds, DLPack out
    assert isinstance(arr, fuseopt.DeviceArray) and arr.shape == (2, 16, 128) and arr.dtype == "float32"
    t = torch.from_dlpack(arr)
    assert t.device.type == "cuda" and rel_err(t.cpu().numpy(), want[0]) < 1e-4
    a, b = sess.run(["out", "out"], dev)  # asked twice: two tensors, not one memory
    assert a.data_ptr() != b.data_ptr() and torch.equal(a, b)
    mixed = dict(feeds, input_ids=dev["input_ids"])  # one CUDA feed, the rest numpy
    (m,) = sess.run(None, mixed)
    assert isinstance(m, torch.Tensor) and rel_err(m.cpu().numpy(), want[0]) < 1e-4
    with pytest.raises(fuseopt.Error, match="^output_device cuda:7: the session runs on cuda:"):
        sess.run(None, dev, output_device="cuda:7")


def test_cuda_feed_errors(optimized, torch_cuda):
    torch = torch_cuda
    feeds, _ = reference()
    sess = fuseopt.InferenceSession(optimized, backend="cuda")
    dev = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
    with pytest.raises(fuseopt.Error, match="^input 'input_ids' is int32 but the model declares int64$"):
        sess.run(None, dict(dev, input_ids=dev["input_ids"].int()))
    wide = torch.from_numpy(np.repeat(feeds["input_ids"], 2, axis=1)).cuda()[:, ::2]
    assert not wide.is_contiguous()
    with pytest.raises(fuseopt.Error, match=r"^input 'input_ids': the DLPack tensor is not contiguous "
                                            r"\(shape \[2,16\], strides \[32,2\] in elements\)"):
        sess.run(None, dict(dev, input_ids=wide))
    with pytest.raises(fuseopt.Error, match=r"^input 'attention_mask' has seq = 8 but input 'input_ids' has seq"):
        sess.run(None, dict(dev, attention_mask=dev["attention_mask"][:, :8].contiguous()))
    if torch.cuda.device_count() > 1:
        with pytest.raises(fuseopt.Error, match=r"^input 'input_ids' is on cuda:1 but the session runs on cuda:0"):
            sess.run(None, dict(dev, input_ids=dev["input_ids"].to("cuda:1")))
    (ok,) = sess.run(None, dev)  # the session still runs after the errors
    assert ok.device.type == "cuda"
