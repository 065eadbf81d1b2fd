"""fuseopt from Python: fuse an ONNX model, run it.

    import fuseopt
    optimized, report = fuseopt.optimize("model.onnx")
    print(report)                      # the table `fuseopt in.onnx out.onnx` prints
    sess = fuseopt.InferenceSession(optimized, backend="cpu")
    outputs = sess.run(None, {"input_ids": ids, "attention_mask": mask})

The work is done by the C++ library (fuseopt._fuseopt); this layer only turns
Python objects into what it takes: paths or serialized models, numpy arrays.
Every failure is a fuseopt.Error (a RuntimeError) carrying the same one-line
message as the command-line tools.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from . import _fuseopt
from ._fuseopt import EmitStats, NodeArg, PassStats, PatternStats, Report

Error = _fuseopt.Error
Error.__module__ = "fuseopt"
Error.__doc__ = "A fuseopt failure; the message is the one line the CLI prints after 'error: '."
Report.__module__ = "fuseopt"
NodeArg.__module__ = "fuseopt"

__all__ = ["DeviceArray", "Error", "InferenceSession", "NodeArg", "Report", "cuda_available", "list_passes", "optimize"]
__version__ = "0.1.0"

# One protobuf message cannot be serialized past 2 GiB.
_PROTOBUF_LIMIT = (1 << 31) - 1


def cuda_available() -> tuple[bool, str]:
    """(True, "") when the CUDA backend can run here, else (False, why)."""
    ok, why = _fuseopt.cuda_available()
    return bool(ok), why


def list_passes() -> list[dict]:
    """Every registered pass: name, category, order, description (fuseopt --list-passes)."""
    return _fuseopt.list_passes()


def _is_path(model: Any) -> bool:
    return isinstance(model, (str, os.PathLike))


def _model_bytes(model: Any) -> bytes:
    """A serialized model, or a ModelProto (anything with ByteSize/SerializeToString) as bytes."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    if not (hasattr(model, "SerializeToString") and hasattr(model, "ByteSize")):
        raise TypeError(f"model must be a path, an onnx.ModelProto or its bytes, not {type(model).__name__}")
    graph = getattr(model, "graph", None)
    for t in getattr(graph, "initializer", ()):
        # TensorProto.EXTERNAL == 1: the data is in a file this proto does not carry.
        if getattr(t, "data_location", 0) == 1:
            raise Error(
                f"ModelProto: initializer '{t.name}' keeps its data in an external file that is not loaded; "
                "pass the model's path instead, or load it with onnx.load(path) (which loads external data)")
    size = model.ByteSize()
    if size > _PROTOBUF_LIMIT:
        raise Error(
            f"ModelProto: {size / (1 << 30):.2f} GiB is over protobuf's 2 GiB limit for one serialized model; "
            "save it with onnx.save_model(model, path, save_as_external_data=True) and pass the path")
    return model.SerializeToString()


def _label(model: Any) -> str:
    """How messages and the report name a model given in memory."""
    return "model bytes" if isinstance(model, (bytes, bytearray, memoryview)) else "ModelProto"


def _shape_specs(shapes: Mapping[str, Any] | Sequence[str] | None) -> list[str]:
    """input_shapes as the CLI's NAME=DIMS specs."""
    if shapes is None:
        return []
    if isinstance(shapes, str):
        return [shapes]
    if not isinstance(shapes, Mapping):
        return [str(s) for s in shapes]
    specs = []
    for name, dims in shapes.items():
        if isinstance(dims, str):
            specs.append(f"{name}={dims}")
        elif isinstance(dims, (int, np.integer)):
            specs.append(f"{name}={int(dims)}")
        else:
            specs.append(f"{name}=" + "x".join(str(int(d)) for d in dims))
    return specs


def _names(arg: str | Iterable[str] | None, what: str) -> list[str] | None:
    if arg is None:
        return None
    if isinstance(arg, str):
        return [arg]
    names = list(arg)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"{what} must be pass names (str), got {type(n).__name__}")
    return names


def optimize(model: str | os.PathLike | Any, *, passes: str | Sequence[str] | None = None,
             disable: str | Sequence[str] | None = None, approximate_gelu: bool = False,
             emit: str = "fuseopt", input_shapes: Mapping[str, Any] | Sequence[str] | None = None,
             fp16: bool = False, keep_io_types: bool = False, max_iterations: int = 10, validate: bool = True):
    """Optimizes a model; returns (onnx.ModelProto, Report).

    model: a path (external data next to it is read as the CLI does), an
      onnx.ModelProto (serialized across; up to 2 GiB) or its serialized bytes.
    passes: run only these passes (names, "cleanup", "fusion"); [] runs none.
    disable: do not run these passes.
    approximate_gelu: allow erf GELU to become the tanh form (--approximate-gelu).
    emit: "fuseopt" (fused ops with function bodies) or "standard" (standard ONNX ops where
      exact, the opset raised as needed; --emit standard); report.emit_ops says what went where.
    input_shapes: specialise input shapes before optimizing (--input-shape): {"input_ids": (1, 128)},
      {"batch": 1} for a symbolic dim, or ["input_ids=1x128", "batch=1"].
    fp16: write a float16 model (--fp16; norm statistics, softmax and reductions stay fp32);
      keep_io_types: with fp16, float graph inputs/outputs stay float32 (--keep-io-types).
    validate: check every node against its operator's schema at the model's opset and every
      tensor proto before anything else (False: as --no-validate); a refusal is a fuseopt.Error.

    Optimized weights over 1.8 GiB come back through a temporary model with
    external data, loaded into the returned ModelProto and deleted.
    """
    import onnx  # only needed here: the result is an onnx.ModelProto

    args = _fuseopt.OptimizeArgs()
    only = _names(passes, "passes")
    if only is not None:
        args.passes = only
        args.passes_given = True
    args.disable = _names(disable, "disable") or []
    args.approximate_gelu = bool(approximate_gelu)
    args.max_iterations = int(max_iterations)
    if not isinstance(emit, str):
        raise TypeError("emit must be 'fuseopt' or 'standard'")
    args.emit = emit
    args.input_shapes = _shape_specs(input_shapes)
    args.fp16 = bool(fp16)
    args.keep_io_types = bool(keep_io_types)
    args.validate = bool(validate)
    with tempfile.TemporaryDirectory(prefix="fuseopt-") as tmp:
        if _is_path(model):
            data, path, report = _fuseopt.optimize_path(os.fspath(model), args, tmp)
        else:
            data, path, report = _fuseopt.optimize_bytes(_model_bytes(model), _label(model), os.getcwd(), args, tmp)
        if data is not None:
            out = onnx.ModelProto()
            out.ParseFromString(data)
        else:
            out = onnx.load(path)  # reads the external data into the proto
    return out, report


def _bfloat16():
    try:
        import ml_dtypes  # optional: numpy has no bfloat16 of its own
        return ml_dtypes.bfloat16
    except ImportError:
        return None


def _dlpack_device(x: Any) -> tuple[int, int] | None:
    dev = getattr(x, "__dlpack_device__", None)
    if dev is None:
        return None
    kind, index = dev()
    return int(kind), int(index)


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST = 1, 2, 3  # DLDeviceType values


def _is_cuda_dlpack(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return False
    dev = _dlpack_device(value)
    return dev is not None and dev[0] == _DL_CUDA


def _as_array(name: str, value: Any) -> np.ndarray:
    """A host feed as a C-contiguous, native-order numpy array.

    numpy arrays are used as they are (a copy only when not contiguous); any
    other object with __dlpack__ in host memory (CPU, CUDA-pinned) is viewed
    through np.from_dlpack without a copy. CUDA tensors take the device path
    (InferenceSession.run); other devices are refused with the reason.
    """
    if not isinstance(value, np.ndarray):
        dev = _dlpack_device(value)
        if dev is not None:
            if dev[0] not in (_DL_CPU, _DL_CUDA_HOST):
                raise Error(f"input '{name}': a DLPack tensor on device type {dev[0]} cannot be fed (fuseopt reads "
                            "CPU (1), CUDA (2) and CUDA-pinned (3) memory)")
            value = np.from_dlpack(value)
        else:
            value = np.asarray(value)
    if not value.dtype.isnative:
        value = value.astype(value.dtype.newbyteorder("="))
    return np.ascontiguousarray(value)


def _capsule(name: str, value: Any, stream: int | None):
    """The DLPack capsule of a CUDA feed. `stream` (the session's CUDA stream) asks the
    producer to order its pending writes before that stream, as the DLPack protocol
    says; a producer without the stream keyword is asked plainly (then ordering is its own)."""
    try:
        return value.__dlpack__(stream=stream)
    except TypeError:
        return value.__dlpack__()


class DeviceArray:
    """An output in CUDA memory that run(..., output_device="cuda") returns when no feed
    was a torch tensor: a DLPack producer for torch.from_dlpack, cupy.from_dlpack,
    jax.dlpack.from_dlpack ... (read once: the consumer takes the memory over, and frees
    it when its own tensor goes; unread, it is freed with this object).

    The data are complete when run() returns (the session's stream is synchronized), so
    a consumer on any stream may read them: the `stream` argument needs no wait.
    """

    __slots__ = ("_capsule", "device_id", "dtype", "shape")

    def __init__(self, capsule, device_id: int, dtype: str, shape: tuple):
        self._capsule, self.device_id, self.dtype, self.shape = capsule, device_id, dtype, shape

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None):
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"fuseopt.DeviceArray lives on cuda:{self.device_id}; it cannot be exported to "
                              f"device {tuple(dl_device)}")
        if copy:
            raise BufferError("fuseopt.DeviceArray is exported without a copy (copy=True is not supported)")
        if self._capsule is None:
            raise BufferError("this fuseopt.DeviceArray was already read through DLPack (a capsule is read once)")
        capsule, self._capsule = self._capsule, None
        return capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_DL_CUDA, self.device_id)

    def __repr__(self) -> str:
        state = "" if self._capsule is not None else ", exported"
        return f"<fuseopt.DeviceArray {self.dtype}{list(self.shape)} on cuda:{self.device_id}{state}>"


def _output_device(arg: Any, session_backend: str, device_ordinal: int) -> str | None:
    if arg is None:
        return None
    if not isinstance(arg, str):
        raise TypeError("output_device must be 'cpu', 'cuda' or None")
    if arg == "cpu":
        return "cpu"
    if arg == "cuda" or (arg.startswith("cuda:") and arg[5:].isdigit()):
        if session_backend != "cuda":
            raise Error(f"output_device {arg}: the session runs on the {session_backend} backend")
        if arg != "cuda" and int(arg[5:]) != device_ordinal:
            raise Error(f"output_device {arg}: the session runs on cuda:{device_ordinal}")
        return "cuda"
    raise Error(f"output_device {arg}: expected cpu, cuda or None")


class InferenceSession:
    """Runs a model on fuseopt's runtime, shaped like onnxruntime.InferenceSession.

    model: a path, an onnx.ModelProto or its serialized bytes (original or optimized).
    backend: "cuda" or "cpu"; default "cuda" when a GPU is usable, else "cpu".
    precision: "fp32", "tf32", "fp16" or "bf16" (fp16/bf16 need CUDA).
    profile: time every node (see profile()); turns CUDA graph capture off.
    validate: check the model's nodes against their schemas on load (False: as fuserun --no-validate).
    """

    def __init__(self, model: str | os.PathLike | Any, backend: str | None = None, precision: str = "fp32", *,
                 profile: bool = False, cuda_graphs: bool = True, threads: int = 0, validate: bool = True):
        if backend is not None and not isinstance(backend, str):
            raise TypeError("backend must be 'cuda', 'cpu' or None")
        if _is_path(model):
            self._s = _fuseopt.Session(os.fspath(model), b"", "", "", backend or "", precision, bool(profile),
                                       bool(cuda_graphs), int(threads), bool(validate))
        else:
            self._s = _fuseopt.Session("", _model_bytes(model), _label(model), os.getcwd(), backend or "",
                                       precision, bool(profile), bool(cuda_graphs), int(threads), bool(validate))
        self._inputs = self._s.inputs()
        self._outputs = self._s.outputs()

    @property
    def backend(self) -> str:
        return self._s.backend

    @property
    def precision(self) -> str:
        return self._s.precision

    @property
    def device(self) -> str:
        return self._s.device

    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any], run_options: Any = None, *,
            output_device: str | None = None):
        """Runs once; returns one output per output name (None: all outputs).

        input_feed maps input names to numpy arrays or DLPack tensors: host ones (CPU,
        CUDA-pinned) are copied in once; CUDA ones (a CUDA session, same GPU, contiguous)
        are read in place on the device, ordered after their producer's stream.
        output_device: None follows the feeds ("cuda" when any feed is a CUDA tensor, else
        "cpu"); "cpu" returns numpy arrays; "cuda" returns outputs in CUDA memory without a
        host copy: torch tensors when a feed was a torch tensor, else fuseopt.DeviceArray
        (DLPack). Device outputs are complete when run returns.
        """
        if not isinstance(input_feed, Mapping):
            raise TypeError(f"input_feed must be a dict of input name -> array, not {type(input_feed).__name__}")
        if isinstance(output_names, str):
            output_names = [output_names]
        where = _output_device(output_device, self.backend, self._s.device_ordinal)
        feeds, device_feeds, torch_fed = {}, {}, False
        for name, value in input_feed.items():
            if not isinstance(name, str):
                raise TypeError(f"input names must be str, got {type(name).__name__}")
            if _is_cuda_dlpack(value):
                if self.backend != "cuda":
                    raise Error(f"input '{name}': a CUDA tensor cannot feed a session on the {self.backend} backend; "
                                "pass tensor.cpu() or create the session with backend='cuda'")
                index, ours = _dlpack_device(value)[1], self._s.device_ordinal
                if index != ours:  # before __dlpack__: its stream argument names a stream of our device
                    raise Error(f"input '{name}' is on cuda:{index} but the session runs on cuda:{ours}; move it "
                                f"there (torch: x.to('cuda:{ours}'))")
                device_feeds[name] = value
                torch_fed = torch_fed or type(value).__module__.split(".")[0] == "torch"
            else:
                feeds[name] = _as_array(name, value)
        if where is None:
            where = "cuda" if device_feeds else "cpu"
        stream = self._s.stream
        capsules = {name: _capsule(name, value, stream) for name, value in device_feeds.items()}
        outs = self._s.run(None if output_names is None else list(output_names), feeds, capsules, where == "cuda")
        if where == "cuda":
            return self._device_outputs(outs, torch_fed)
        types = {o.name: o.type for o in self._outputs}
        names = [o.name for o in self._outputs] if output_names is None else list(output_names)
        bf16 = None
        for i, n in enumerate(names):
            if types.get(n) == "tensor(bfloat16)":  # its bits come back as uint16
                bf16 = bf16 or _bfloat16()
                outs[i] = outs[i].view(bf16) if bf16 is not None else _bf16_bits_to_float(outs[i])
        return outs

    @staticmethod
    def _device_outputs(outs: list, as_torch: bool) -> list:
        if as_torch:
            from torch.utils.dlpack import from_dlpack  # a torch tensor was fed: torch is there
            # The capsule itself (the legacy unversioned form every torch reads); the data are
            # complete already, so no stream handshake is needed.
            return [from_dlpack(capsule) for capsule, _, _, _ in outs]
        return [DeviceArray(capsule, dev, dtype, shape) for capsule, dev, dtype, shape in outs]

    def hold_kv_cache(self, capacity: int) -> list[str]:
        """Keeps the model's KV cache on the device between runs, for generation loops.

        The past inputs of the fused attention (past_key_values.*) are then left out of
        input_feed: each run reads them from the session's cache and appends its new rows there
        in place (no copy of the cache per step); a run that does pass them loads the cache from
        them first. Presents come back as views of the cache (strided DLPack tensors on the
        device; dense numpy arrays on the host). Raises fuseopt.Error naming the node when the
        model's form does not allow it. Returns the past input names the cache stands for.
        """
        self._s.hold_kv_cache(int(capacity))
        return self._s.kv_cache_inputs()

    @property
    def kv_cache_length(self) -> int:
        """Positions the held KV cache holds (0 before it is loaded or when none is held)."""
        return self._s.kv_cache_length()

    def set_kv_cache_length(self, length: int) -> None:
        """Forgets the held positions from `length` on (a rewind; 0 <= length <= kv_cache_length)."""
        self._s.set_kv_cache_length(int(length))

    def profile(self, reset: bool = False) -> dict:
        """The runtime's profile: per op type and per node (ms, calls), runs, graph replays,
        device-to-host copies. Node timings need InferenceSession(..., profile=True)."""
        p = self._s.profile()
        if reset:
            self._s.reset_profile()
        return p

    def __repr__(self) -> str:
        return f"<fuseopt.InferenceSession {self._s.label} on {self.backend} ({self.device}), {self.precision}>"


def _bf16_bits_to_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)
