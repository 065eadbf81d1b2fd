#!/usr/bin/env python3
"""The kernels added for less common exporter ops against ONNX Runtime, op by op.

For each case a one-node model is built with the onnx helper, ONNX Runtime
computes the outputs on seeded random inputs, the pair is written in the
backend-test layout, and `fuserun --backend cpu --check` must pass (norm-wise
rtol 1e-5) on the model and on its `fuseopt`-optimized copy (shape functions,
constant folding and cleanups see the new ops too). Covers InstanceNormalization,
GroupNormalization (opset 18 per-group and 21 per-channel scale), RMSNormalization
(opset 23), ConvTranspose (pads, output_padding, output_shape, auto_pad, groups,
1-D/3-D), TopK, ArgMax/ArgMin, Selu/Celu/Mish/ThresholdedRelu/Shrink, IsInf and
GridSample (opset 16 and 20 spellings), Attention (opsets 23, 24 and 25's sliding window),
CumProd and BitCast (26), Range (27), SpaceToDepth's CRD mode and Mod (28). Cases whose opset this onnxruntime does
not implement are reported and skipped.
Invoked by ctest as: test_extra_ops_ort.py --bin <build>/bin --src <repo>.
FUSERUN_BACKEND=cuda (and FUSERUN_RTOL) runs the same cases on another backend.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fuseopt_testlib import parse_args, require  # noqa: E402

np, onnx, ort = require("numpy", "onnx", "onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL


def case(name, op, inputs, attrs=None, opset=17, consts=None, outs=(F,), order=None, ref=None):
    """order: the node's input names when they are not inputs then consts ("" = omitted).
    ref: a numpy reference of the outputs, for ops this onnxruntime does not run (used only then)."""
    return dict(name=name, op=op, inputs=inputs, attrs=attrs or {}, opset=opset, consts=consts or [], outs=outs,
                order=order, ref=ref)


def swish(x, alpha=1.0):
    return (x.astype(np.float64) / (1.0 + np.exp(-alpha * x.astype(np.float64)))).astype(np.float32)


def stft(x, step, w=None, n=None, onesided=True):
    """STFT-17 in numpy: frames of `step`, windowed, DFT; [B, frames, bins, 2]."""
    sig = x[..., 0].astype(np.float64) + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    n = len(w) if n is None else n
    win = np.ones(n) if w is None else w.astype(np.float64)
    frames = 1 + (sig.shape[1] - n) // step
    spec = np.stack([np.fft.fft(sig[:, f * step:f * step + n] * win, axis=-1) for f in range(frames)], axis=1)
    if onesided:
        spec = spec[..., :n // 2 + 1]
    return [np.stack([spec.real, spec.imag], axis=-1).astype(np.float32)]


def r(*shape, seed=0, lo=None, scale=1.0, offset=0.0):
    a = (np.random.RandomState(seed + sum(shape)).randn(*shape) * scale + offset).astype(np.float32)
    return np.abs(a) + lo if lo is not None else a


def grid(*shape, seed=0):
    return np.random.RandomState(seed).uniform(-1.3, 1.3, size=shape).astype(np.float32)


def with_inf():
    a = r(3, 5)
    a[0, 1], a[1, 2], a[2, 3] = np.inf, -np.inf, np.nan
    return a


def k(v):
    return [("k", np.array([v], np.int64))]


CASES = [
    case("instancenorm_3d", "InstanceNormalization", [("x", r(2, 5, 7, offset=3)), ("s", r(5, seed=1)), ("b", r(5, seed=2))]),
    case("instancenorm_4d_eps", "InstanceNormalization", [("x", r(2, 3, 6, 5)), ("s", r(3, seed=1)), ("b", r(3, seed=2))], {"epsilon": 1e-2}),
    case("instancenorm_spatial1", "InstanceNormalization", [("x", r(2, 4, 1)), ("s", r(4, seed=1)), ("b", r(4, seed=2))]),
    case("groupnorm18_per_group", "GroupNormalization", [("x", r(2, 6, 5, 3)), ("s", r(3, seed=1)), ("b", r(3, seed=2))],
         {"num_groups": 3}, opset=18),
    case("groupnorm21_per_channel", "GroupNormalization", [("x", r(2, 6, 11)), ("s", r(6, seed=1)), ("b", r(6, seed=2))],
         {"num_groups": 2, "epsilon": 1e-3}, opset=21),
    case("rmsnorm23_last", "RMSNormalization", [("x", r(2, 5, 16)), ("s", r(16, seed=1))], {"epsilon": 1e-6}, opset=23),
    case("rmsnorm23_axis1", "RMSNormalization", [("x", r(2, 3, 4)), ("s", r(3, 4, seed=1))], {"axis": 1}, opset=23),
    case("convtranspose_2d", "ConvTranspose", [("x", r(2, 4, 5, 6)), ("w", r(4, 3, 3, 3, seed=1)), ("b", r(6, seed=2))],
         {"group": 2, "strides": [2, 2], "pads": [1, 0, 1, 1], "output_padding": [1, 0]}),
    case("convtranspose_1d_dil", "ConvTranspose", [("x", r(1, 3, 9)), ("w", r(3, 2, 4, seed=1))],
         {"dilations": [2], "strides": [3], "pads": [2, 1]}),
    case("convtranspose_output_shape", "ConvTranspose", [("x", r(1, 2, 5, 5)), ("w", r(2, 3, 3, 3, seed=1))],
         {"strides": [2, 2], "output_shape": [10, 9]}),
    case("convtranspose_same_upper", "ConvTranspose", [("x", r(1, 2, 4, 5)), ("w", r(2, 2, 4, 3, seed=1))],
         {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    case("convtranspose_same_lower", "ConvTranspose", [("x", r(1, 2, 4, 5)), ("w", r(2, 2, 4, 3, seed=1))],
         {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    case("convtranspose_3d", "ConvTranspose", [("x", r(1, 2, 3, 4, 3)), ("w", r(2, 2, 2, 3, 2, seed=1)), ("b", r(2, seed=2))],
         {"strides": [2, 1, 2], "pads": [0, 1, 0, 0, 1, 1]}),
    case("topk_largest", "TopK", [("x", r(4, 30))], {"axis": 1}, consts=k(5), outs=(F, I64)),
    case("topk_smallest_axis0", "TopK", [("x", r(7, 3, 4))], {"axis": 0, "largest": 0}, consts=k(3), outs=(F, I64)),
    case("topk_moe", "TopK", [("x", r(16, 8))], {}, consts=k(2), outs=(F, I64)),
    case("argmax_keep", "ArgMax", [("x", r(3, 7, 5))], {"axis": 1}, outs=(I64,)),
    case("argmax_nokeep", "ArgMax", [("x", r(3, 7, 5))], {"axis": -1, "keepdims": 0}, outs=(I64,)),
    case("argmin_last", "ArgMin", [("x", np.round(r(4, 9)))], {"axis": 1, "select_last_index": 1}, outs=(I64,)),
    case("selu", "Selu", [("x", r(4, 5, scale=3))]),
    case("selu_attrs", "Selu", [("x", r(4, 5, scale=3))], {"alpha": 1.5, "gamma": 2.0}),
    case("celu", "Celu", [("x", r(4, 5, scale=3))], {"alpha": 0.7}),
    case("mish", "Mish", [("x", r(4, 5, scale=10))], opset=18),
    case("thresholdedrelu", "ThresholdedRelu", [("x", r(4, 5))], {"alpha": 0.3}),
    case("shrink", "Shrink", [("x", r(4, 5, scale=2))], {"lambd": 0.6, "bias": 0.2}),
    case("sinh", "Sinh", [("x", r(4, 5))]),
    case("cosh", "Cosh", [("x", r(4, 5))]),
    case("asin", "Asin", [("x", np.tanh(r(4, 5)))]),
    case("acos", "Acos", [("x", np.tanh(r(4, 5)))]),
    case("asinh", "Asinh", [("x", r(4, 5, scale=5))]),
    case("acosh", "Acosh", [("x", r(4, 5, lo=1.0))]),
    case("atanh", "Atanh", [("x", np.tanh(r(4, 5)))]),
    case("isinf", "IsInf", [("x", with_inf())], outs=(B,)),
    case("isinf_neg_only", "IsInf", [("x", with_inf())], {"detect_positive": 0}, outs=(B,)),
    case("gridsample16_bilinear_zeros", "GridSample", [("x", r(2, 3, 7, 9)), ("g", grid(2, 5, 6, 2))], opset=16),
    case("gridsample16_reflection_ac", "GridSample", [("x", r(2, 3, 7, 9)), ("g", grid(2, 5, 6, 2))],
         {"padding_mode": "reflection", "align_corners": 1}, opset=16),
    case("gridsample16_nearest_border", "GridSample", [("x", r(1, 2, 5, 4)), ("g", grid(1, 6, 6, 2))],
         {"mode": "nearest", "padding_mode": "border"}, opset=16),
    case("attention23_4d_gqa", "Attention", [("q", r(2, 4, 5, 8)), ("k", r(2, 2, 7, 8, seed=1)), ("v", r(2, 2, 7, 6, seed=2))],
         opset=23),
    case("attention23_3d_float_mask_scale", "Attention",
         [("q", r(2, 5, 16)), ("k", r(2, 7, 16, seed=1)), ("v", r(2, 7, 16, seed=2)), ("m", r(5, 7, seed=3))],
         {"q_num_heads": 4, "kv_num_heads": 4, "scale": 0.3}, opset=23),
    case("attention23_causal_past", "Attention",
         [("q", r(1, 4, 2, 8)), ("k", r(1, 2, 2, 8, seed=1)), ("v", r(1, 2, 2, 8, seed=2)), ("m", np.ones((1, 1, 2, 5), bool)),
          ("pk", r(1, 2, 3, 8, seed=3)), ("pv", r(1, 2, 3, 8, seed=4))],
         {"is_causal": 1}, opset=23, outs=(F, F, F)),
    case("attention23_bool_mask_softcap", "Attention",
         [("q", r(2, 2, 4, 8, scale=3)), ("k", r(2, 2, 4, 8, seed=1, scale=3)), ("v", r(2, 2, 4, 8, seed=2)),
          ("m", np.broadcast_to(np.array([[1, 1, 0, 1], [1, 1, 1, 0]], bool).reshape(2, 1, 1, 4), (2, 1, 4, 4)).copy())],
         {"softcap": 2.0}, opset=23),
    case("attention23_causal_3d_gqa", "Attention", [("q", r(1, 6, 24)), ("k", r(1, 6, 8, seed=1)), ("v", r(1, 6, 8, seed=2))],
         {"is_causal": 1, "q_num_heads": 6, "kv_num_heads": 2}, opset=23),
    # Opset 24 (the newest fuseopt reads): the same op at its version 24 (nonpad_kv_seqlen absent).
    case("attention24_causal_3d_gqa", "Attention", [("q", r(2, 5, 24)), ("k", r(2, 5, 8, seed=1)), ("v", r(2, 5, 8, seed=2))],
         {"is_causal": 1, "q_num_heads": 6, "kv_num_heads": 2}, opset=24),
    # Opset 25: Attention's sliding window, composed with is_causal, a past and a bool mask.
    case("attention25_window_causal", "Attention", [("q", r(2, 2, 6, 8)), ("k", r(2, 2, 6, 8, seed=1)), ("v", r(2, 2, 6, 8, seed=2))],
         {"is_causal": 1, "left_window_size": 2}, opset=25),
    case("attention25_window_both_past", "Attention",
         [("q", r(1, 4, 3, 8)), ("k", r(1, 2, 3, 8, seed=1)), ("v", r(1, 2, 3, 8, seed=2)),
          ("pk", r(1, 2, 4, 8, seed=3)), ("pv", r(1, 2, 4, 8, seed=4))],
         {"left_window_size": 3, "right_window_size": 1}, opset=25, outs=(F, F, F), order=["q", "k", "v", "", "pk", "pv"]),
    case("attention25_window_3d_mask", "Attention",
         [("q", r(2, 5, 16)), ("k", r(2, 5, 16, seed=1)), ("v", r(2, 5, 16, seed=2)),
          ("m", np.array([[1, 1, 1, 0, 1]] * 5, bool))],
         {"q_num_heads": 2, "kv_num_heads": 2, "right_window_size": 0, "left_window_size": 1}, opset=25),
    # Opsets 26-28: CumProd, BitCast, Range with stash_type, SpaceToDepth's CRD mode; an older
    # op at opset 28 (its version there only renamed types).
    case("cumprod26", "CumProd", [("x", r(3, 4, 5, scale=0.5, offset=1))], opset=26, consts=[("a", np.array(1, np.int64))]),
    case("cumprod26_excl_rev", "CumProd", [("x", r(4, 6, scale=0.5, offset=1))], {"exclusive": 1, "reverse": 1}, opset=26,
         consts=[("a", np.array(-1, np.int64))]),
    case("cumprod26_int64", "CumProd", [("x", np.array([[1, 2, -3, 4], [2, 2, 2, 2]], np.int64))], opset=26,
         consts=[("a", np.array(1, np.int64))], outs=(I64,)),
    case("bitcast26_f32_i32", "BitCast", [("x", with_inf())], {"to": TensorProto.INT32}, opset=26, outs=(TensorProto.INT32,)),
    case("bitcast26_i64_f64", "BitCast", [("x", np.arange(-3, 9, dtype=np.int64) * 4611686018427387)], {"to": TensorProto.DOUBLE},
         opset=26, outs=(TensorProto.DOUBLE,)),
    case("range27_float", "Range", [], {}, opset=27,
         consts=[("s", np.array(0.5, np.float32)), ("l", np.array(7.2, np.float32)), ("d", np.array(0.75, np.float32))]),
    case("spacetodepth28_crd", "SpaceToDepth", [("x", r(2, 3, 4, 6))], {"blocksize": 2, "mode": "CRD"}, opset=28),
    case("spacetodepth28_dcr", "SpaceToDepth", [("x", r(1, 2, 6, 4))], {"blocksize": 2}, opset=28),
    # Swish (24) and SwiGLU (28): onnxruntime 1.32 implements neither (SwiGLU's function body
    # calls Swish): numpy references.
    case("swish24", "Swish", [("x", r(3, 7, scale=4))], {"alpha": 1.5}, opset=24,
         ref=lambda x: [swish(x, 1.5)]),
    case("swiglu28", "SwiGLU", [("a", r(2, 3, 8, scale=3)), ("b", r(2, 3, 8, seed=1))], opset=28,
         ref=lambda a, b: [swish(a) * b]),
    case("swiglu28_alpha", "SwiGLU", [("a", r(5, 6, scale=3)), ("b", r(5, 6, seed=1))], {"alpha": 1.702}, opset=28,
         ref=lambda a, b: [swish(a, 1.702) * b]),
    case("mod28_fmod", "Mod", [("a", r(3, 5, scale=4)), ("b", r(3, 5, seed=1, lo=0.5))], {"fmod": 1}, opset=28),
    case("stft_real_window", "STFT", [("x", r(2, 64, 1)), ("w", np.hanning(16).astype(np.float32))], {},
         opset=17, consts=[("step", np.array(4, np.int64))], order=["x", "step", "w"]),
    case("stft_real_frame_length", "STFT", [("x", r(1, 50, 1))], {},
         opset=17, consts=[("step", np.array(7, np.int64)), ("n", np.array(12, np.int64))], order=["x", "step", "", "n"]),
    # onnxruntime 1.31's complex two-sided STFT returns NaN (1.32's does not): the numpy
    # reference stands in where onnxruntime's output has NaN the inputs cannot explain.
    case("stft_complex_twosided", "STFT", [("x", r(2, 40, 2)), ("w", r(10, seed=3))], {"onesided": 0},
         opset=17, consts=[("step", np.array(5, np.int64)), ("n", np.array(10, np.int64))], order=["x", "step", "w", "n"],
         ref=lambda x, w: stft(x, 5, w, 10, onesided=False)),
    case("dft17_real", "DFT", [("x", r(2, 16, 1))], {"axis": 1}, opset=17),
    case("dft17_complex_inverse", "DFT", [("x", r(2, 12, 2))], {"axis": 1, "inverse": 1}, opset=17),
    case("dft17_onesided_padded", "DFT", [("x", r(3, 10, 1))], {"axis": 1, "onesided": 1}, opset=17,
         consts=[("n", np.array(16, np.int64))], order=["x", "n"]),
    case("dft17_rank4_axis2", "DFT", [("x", r(2, 3, 7, 2))], {"axis": 2}, opset=17),
    case("dft20_axis_input_truncated", "DFT", [("x", r(2, 5, 8, 2))], {}, opset=20,
         consts=[("n", np.array(6, np.int64)), ("axis", np.array(2, np.int64))], order=["x", "n", "axis"]),
    case("dft20_default_axis", "DFT", [("x", r(4, 9, 1))], {}, opset=20),
    case("quantize_per_tensor_uint8", "QuantizeLinear", [("x", r(3, 7, scale=3))], opset=13,
         consts=[("s", np.array(0.05, np.float32)), ("z", np.array(128, np.uint8))], outs=(TensorProto.UINT8,)),
    case("quantize_per_axis_int8", "QuantizeLinear", [("x", r(2, 4, 5, scale=3))], {"axis": 1}, opset=13,
         consts=[("s", np.array([0.01, 0.02, 0.05, 0.1], np.float32)), ("z", np.array([0, -3, 5, 1], np.int8))],
         outs=(TensorProto.INT8,)),
    case("quantize_no_zp", "QuantizeLinear", [("x", r(4, 6, scale=2))], opset=13,
         consts=[("s", np.array(0.02, np.float32))], outs=(TensorProto.UINT8,)),
    case("dequantize_per_tensor", "DequantizeLinear", [("x", np.arange(-20, 20, dtype=np.int8).reshape(5, 8))], opset=13,
         consts=[("s", np.array(0.125, np.float32)), ("z", np.array(-3, np.int8))]),
    case("dequantize_per_axis_uint8", "DequantizeLinear", [("x", np.arange(0, 240, 4, dtype=np.uint8).reshape(3, 4, 5))],
         {"axis": -2}, opset=13, consts=[("s", np.array([0.5, 0.25, 2, 1], np.float32)), ("z", np.array([1, 2, 3, 200], np.uint8))]),
    case("dequantize_int32", "DequantizeLinear", [("x", np.array([[-70000, 3, 1000]], np.int32))], opset=13,
         consts=[("s", np.array(0.001, np.float32))]),
    case("bitwise_and_bcast", "BitwiseAnd", [("a", np.arange(-12, 12, dtype=np.int64).reshape(4, 6)), ("b", np.array([3, -2, 7, 0, 5, -9], np.int64))],
         opset=18, outs=(I64,)),
    case("bitwise_or_int32", "BitwiseOr", [("a", np.arange(-6, 6, dtype=np.int32).reshape(3, 4)), ("b", np.array([[1], [2], [-4]], np.int32))],
         opset=18, outs=(TensorProto.INT32,)),
    case("bitwise_xor", "BitwiseXor", [("a", np.arange(20, dtype=np.int64)), ("b", np.arange(20, dtype=np.int64)[::-1].copy())],
         opset=18, outs=(I64,)),
    case("bitwise_not", "BitwiseNot", [("a", np.arange(-5, 5, dtype=np.int32))], opset=18, outs=(TensorProto.INT32,)),
    case("bitshift_left_u8", "BitShift", [("a", np.arange(0, 250, 25, dtype=np.uint8)), ("b", np.array([0, 1, 2, 3, 4, 5, 6, 7, 1, 2], np.uint8))],
         {"direction": "LEFT"}, opset=11, outs=(TensorProto.UINT8,)),
    case("bitshift_right_u32", "BitShift", [("a", np.array([1, 1000, 65536, 2**31], np.uint32)), ("b", np.array([1, 3, 16, 31], np.uint32))],
         {"direction": "RIGHT"}, opset=11, outs=(TensorProto.UINT32,)),
    case("lpnorm_p2_last", "LpNormalization", [("x", r(3, 4, 7))]),
    case("lpnorm_p1_axis1", "LpNormalization", [("x", r(3, 4, 7))], {"axis": 1, "p": 1}),
    case("mvn_default_axes", "MeanVarianceNormalization", [("x", r(2, 3, 4, 5, offset=2))]),
    case("mvn_last_axis", "MeanVarianceNormalization", [("x", r(2, 3, 9))], {"axes": [-1]}),
    case("lrn_size3", "LRN", [("x", r(2, 6, 4, 5))], {"size": 3, "alpha": 1e-2, "beta": 0.75, "bias": 1.0}),
    case("lrn_size5", "LRN", [("x", r(1, 7, 3, 3, scale=3))], {"size": 5, "alpha": 0.1, "beta": 0.5, "bias": 2.0}),
    case("rotary23_4d_pos", "RotaryEmbedding",
         [("x", r(2, 3, 5, 8)), ("c", r(10, 4, seed=1)), ("s", r(10, 4, seed=2)),
          ("p", np.array([[0, 1, 2, 3, 4], [9, 3, 3, 0, 7]], np.int64))], opset=23),
    case("rotary23_3d_interleaved_nopos", "RotaryEmbedding",
         [("x", r(2, 5, 3 * 8)), ("c", r(2, 5, 4, seed=1)), ("s", r(2, 5, 4, seed=2))],
         {"interleaved": 1, "num_heads": 3}, opset=23),
    case("rotary23_partial_dim", "RotaryEmbedding",
         [("x", r(1, 2, 4, 10)), ("c", r(6, 3, seed=1)), ("s", r(6, 3, seed=2)), ("p", np.array([[5, 0, 2, 1]], np.int64))],
         {"rotary_embedding_dim": 6}, opset=23),
    case("affinegrid20", "AffineGrid", [("t", r(2, 2, 3))], opset=20,
         consts=[("size", np.array([2, 3, 5, 7], np.int64))]),
    case("affinegrid20_align", "AffineGrid", [("t", r(1, 2, 3))], {"align_corners": 1}, opset=20,
         consts=[("size", np.array([1, 1, 4, 6], np.int64))]),
    case("hann_periodic", "HannWindow", [], {}, opset=17, consts=[("n", np.array(10, np.int64))]),
    case("hamming_symmetric", "HammingWindow", [], {"periodic": 0}, opset=17, consts=[("n", np.array(9, np.int64))]),
    case("blackman_periodic", "BlackmanWindow", [], {}, opset=17, consts=[("n", np.array(12, np.int32))]),
    case("gridsample20_linear_reflection", "GridSample", [("x", r(1, 2, 5, 4)), ("g", grid(1, 6, 6, 2))],
         {"mode": "linear", "padding_mode": "reflection"}, opset=20),
]


def build(c):
    nodes_in, graph_inputs, inits = [], [], []
    for n, a in c["inputs"]:
        nodes_in.append(n)
        graph_inputs.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
    for n, a in c["consts"]:
        nodes_in.append(n)
        inits.append(numpy_helper.from_array(a, n))
    if c["order"] is not None:
        nodes_in = c["order"]
    outs = [f"y{i}" for i in range(len(c["outs"]))]
    node = helper.make_node(c["op"], nodes_in, outs, name=c["name"], **c["attrs"])
    g = helper.make_graph([node], c["name"], graph_inputs,
                          [helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, c["outs"])],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", c["opset"])],
                             ir_version=13 if c["opset"] >= 25 else 10 if c["opset"] >= 21 else 8)


def refusals(fuserun, tmp):
    """Bad models of the new ops fail with one line naming the node and why, not a crash."""
    bad = []
    cases = [("swiglu_broadcast", "SwiGLU", [("a", (2, 8)), ("b", (1, 8))], {}, 28, "no broadcasting"),
             ("bitcast_width", "BitCast", [("x", (3,))], {"to": TensorProto.INT64}, 26, "widths differ")]
    for name, op, ins, attrs, opset, want in cases:
        node = helper.make_node(op, [n for n, _ in ins], ["y"], name=name, **attrs)
        g = helper.make_graph([node], name, [helper.make_tensor_value_info(n, F, list(sh)) for n, sh in ins],
                              [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)])
        path = os.path.join(tmp, name + ".onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=13), path)
        p = subprocess.run([fuserun, "--backend", os.environ.get("FUSERUN_BACKEND", "cpu"), "-q", path],
                           capture_output=True, text=True, timeout=120)
        ok = p.returncode != 0 and want in p.stderr and name in p.stderr and "Traceback" not in p.stderr
        print(("ok   " if ok else "FAIL ") + "refuses " + name + ("" if ok else ": rc %d, %s" % (p.returncode, p.stderr[-600:])))
        if not ok:
            bad.append(name)
    return bad


def main():
    args = parse_args()
    fuserun = os.path.join(args.bin, "fuserun")
    failures, skipped, ran = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for c in CASES:
            if args.k and args.k not in c["name"]:
                continue
            ran += 1
            d = os.path.join(tmp, c["name"])
            data = os.path.join(d, "test_data_set_0")
            os.makedirs(data)
            path = os.path.join(d, "model.onnx")
            onnx.save(build(c), path)
            try:
                sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                outs = sess.run(None, {n: a for n, a in c["inputs"]})
            except Exception as e:  # an opset or op this onnxruntime lacks
                if c["ref"] is None:
                    print("skip " + c["name"] + ": onnxruntime: " + str(e).splitlines()[0][:200])
                    skipped.append(c["name"])
                    continue
                outs = c["ref"](*[a for _, a in c["inputs"]])
            finite_in = all(np.isfinite(a).all() for _, a in c["inputs"] if np.asarray(a).dtype.kind == "f")
            if c["ref"] is not None and finite_in and any(np.isnan(np.asarray(o)).any() for o in outs):
                print("note " + c["name"] + ": onnxruntime " + ort.__version__ + " gives NaN on finite inputs; numpy reference")
                outs = c["ref"](*[a for _, a in c["inputs"]])
            for i, (n, a) in enumerate(c["inputs"]):
                with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(a, n).SerializeToString())
            for i, o in enumerate(outs):
                with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(np.asarray(o), f"y{i}").SerializeToString())
            backend = os.environ.get("FUSERUN_BACKEND", "cpu")
            rtol = os.environ.get("FUSERUN_RTOL", "1e-5")
            opt = os.path.join(d, "opt.onnx")
            po = subprocess.run([os.path.join(args.bin, "fuseopt"), path, opt], capture_output=True, text=True, timeout=120)
            ok = po.returncode == 0
            if not ok:
                print("FAIL " + c["name"] + ": fuseopt: " + po.stderr[-1500:])
            for model in (path, opt) if ok else ():
                p = subprocess.run([fuserun, "--backend", backend, "-q", "--rtol", rtol, "--check", data, model],
                                   capture_output=True, text=True, timeout=120)
                ok = ok and p.returncode == 0 and "check: PASS" in p.stdout
                if not ok:
                    print(os.path.basename(model) + ": " + p.stdout[-1500:] + p.stderr[-1500:])
                    break
            print(("ok   " if ok else "FAIL ") + c["name"])
            if not ok:
                failures.append(c["name"])
        failures += refusals(fuserun, tmp)
    ran -= len(skipped)
    print(f"{ran - len(failures)}/{ran} cases pass, {len(skipped)} skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
