#!/usr/bin/env python3
"""Generates cpu_resize_refs.h: expected Resize outputs from onnx.reference (the ONNX spec's
reference implementation), cross-checked against onnxruntime where ORT implements the case.

Run: python3 tests/kernels/gen_cpu_resize_refs.py > tests/kernels/cpu_resize_refs.h
Input data: x[i] = ((i * 7 + 3) % 11) * 0.5 - 2, mirrored by resize_input() in cpu_resize_test.cc.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

try:
    import onnxruntime as ort
except ImportError:  # the cross-check is optional
    ort = None


def data(shape):
    n = int(np.prod(shape))
    i = np.arange(n)
    return (((i * 7 + 3) % 11) * 0.5 - 2).astype(np.float32).reshape(shape)


# name, in_shape, attrs, scales, sizes, roi, ort_check
CASES = [
    ("nearest_default_scales", [1, 1, 3, 4], {}, [1, 1, 0.6, 1.7], None, None, True),
    ("nearest_asym_floor_sizes", [1, 1, 3, 4], dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor"), None, [1, 1, 5, 7], None, True),
    ("nearest_align_ceil_sizes", [1, 1, 3, 4], dict(coordinate_transformation_mode="align_corners", nearest_mode="round_prefer_ceil"), None, [1, 1, 2, 5], None, True),
    ("nearest_hps_ceil", [1, 1, 3, 4], dict(coordinate_transformation_mode="half_pixel_symmetric", nearest_mode="ceil"), [1, 1, 1.5, 0.8], None, None, True),
    ("nearest_pytorch_floor_down", [1, 2, 5, 4], dict(coordinate_transformation_mode="pytorch_half_pixel", nearest_mode="floor"), [1, 1, 0.5, 0.75], None, None, True),
    ("linear_half_pixel_up", [1, 1, 3, 4], dict(mode="linear"), [1, 1, 2, 2], None, None, True),
    ("linear_align_sizes", [1, 1, 3, 4], dict(mode="linear", coordinate_transformation_mode="align_corners"), None, [1, 1, 4, 3], None, True),
    ("linear_pytorch_sizes", [1, 1, 3, 4], dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"), None, [1, 1, 2, 6], None, True),
    ("linear_asym_scales", [1, 1, 3, 4], dict(mode="linear", coordinate_transformation_mode="asymmetric"), [1, 1, 0.5, 2.5], None, None, True),
    ("linear_hps_scales", [1, 1, 3, 4], dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"), [1, 1, 1.7, 0.55], None, None, True),
    ("linear_3d", [2, 3, 4], dict(mode="linear"), [1.5, 2, 0.5], None, None, True),
    ("cubic_half_pixel", [1, 1, 3, 4], dict(mode="cubic"), [1, 1, 2, 1.5], None, None, True),
    ("cubic_align_excl_a05", [1, 1, 3, 4], dict(mode="cubic", coordinate_transformation_mode="align_corners", cubic_coeff_a=-0.5, exclude_outside=1), None, [1, 1, 5, 5], None, True),
    ("cubic_asym_down", [1, 1, 5, 6], dict(mode="cubic", coordinate_transformation_mode="asymmetric"), [1, 1, 0.7, 0.6], None, None, True),
    ("cubic_excl_half_pixel", [1, 1, 4, 4], dict(mode="cubic", exclude_outside=1), None, [1, 1, 3, 7], None, True),
    ("tf_crop_linear", [1, 1, 3, 4], dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=10.0), None, [1, 1, 4, 3], [0, 0, 0.2, 0.1, 1, 1, 0.9, 1.3], True),
    ("tf_crop_nearest", [1, 1, 3, 4], dict(coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0), None, [1, 1, 4, 5], [0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], True),
    ("tf_crop_cubic", [1, 1, 4, 4], dict(mode="cubic", coordinate_transformation_mode="tf_crop_and_resize"), None, [1, 1, 3, 3], [0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8], True),
    ("axes_linear_sizes", [1, 2, 3, 4], dict(mode="linear", axes=[3, 2]), None, [5, 2], None, True),
    ("axes_nearest_scales", [2, 3, 4], dict(axes=[1]), [1.5], None, None, True),
    ("keep_not_larger", [1, 1, 3, 4], dict(mode="linear", axes=[2, 3], keep_aspect_ratio_policy="not_larger"), None, [7, 7], None, True),
    ("keep_not_smaller", [1, 1, 3, 4], dict(mode="nearest", axes=[2, 3], keep_aspect_ratio_policy="not_smaller"), None, [7, 7], None, True),
    ("antialias_linear_down", [1, 1, 6, 8], dict(mode="linear", antialias=1), [1, 1, 0.5, 0.6], None, None, True),
    ("antialias_cubic_down", [1, 1, 6, 8], dict(mode="cubic", antialias=1), None, [1, 1, 2, 3], None, True),
    ("antialias_linear_up", [1, 1, 3, 4], dict(mode="linear", antialias=1), [1, 1, 2, 1.5], None, None, True),
]


def run(case):
    name, shape, attrs, scales, sizes, roi, ort_check = case
    x = data(shape)
    inputs = ["x", "roi" if roi is not None else "", "scales" if scales is not None else "", "sizes" if sizes is not None else ""]
    while inputs[-1] == "":
        inputs.pop()
    node = helper.make_node("Resize", inputs, ["y"], **attrs)
    inits = []
    if roi is not None:
        inits.append(helper.make_tensor("roi", TensorProto.FLOAT, [len(roi)], roi))
    if scales is not None:
        inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [len(scales)], scales))
    if sizes is not None:
        inits.append(helper.make_tensor("sizes", TensorProto.INT64, [len(sizes)], sizes))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    if ort and ort_check:
        got = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        if got.shape != want.shape or not np.allclose(got, want, atol=1e-5, rtol=1e-4):
            print(f"warning: {name}: onnxruntime differs from onnx.reference", file=sys.stderr)
    return x, want


def fmt_f(v):
    def one(a):
        t = "%.9g" % a
        if not any(c in t for c in ".en"):
            t += ".0"
        return t + "f"
    return "{" + ", ".join(one(a) for a in np.asarray(v, dtype=np.float64).ravel()) + "}"


def fmt_i(v):
    return "{" + ", ".join(str(int(a)) for a in v) + "}"


def main():
    print("// Generated by tests/kernels/gen_cpu_resize_refs.py (onnx.reference); do not edit.")
    print("#pragma once")
    print("#include <cstdint>")
    print("#include <string>")
    print("#include <vector>")
    print("namespace cpu_resize_refs {")
    print("struct Ref {")
    print("  std::string name, mode, coord, nearest, policy;")
    print("  float cubic_a, extrapolation;")
    print("  int exclude_outside, antialias;")
    print("  std::vector<int64_t> axes;  // empty = no axes attribute")
    print("  std::vector<float> roi, scales;")
    print("  std::vector<int64_t> sizes, in_shape, out_shape;")
    print("  std::vector<float> want;")
    print("};")
    print("inline const std::vector<Ref>& refs() {")
    print("  static const std::vector<Ref> r = {")
    for case in CASES:
        name, shape, attrs, scales, sizes, roi, _ = case
        _, want = run(case)
        print("      {%s, %s, %s, %s, %s, %sf, %sf, %d, %d, %s, %s, %s, %s, %s, %s,\n       %s}," % (
            '"%s"' % name, '"%s"' % attrs.get("mode", "nearest"),
            '"%s"' % attrs.get("coordinate_transformation_mode", "half_pixel"),
            '"%s"' % attrs.get("nearest_mode", "round_prefer_floor"),
            '"%s"' % attrs.get("keep_aspect_ratio_policy", "stretch"),
            repr(float(attrs.get("cubic_coeff_a", -0.75))), repr(float(attrs.get("extrapolation_value", 0.0))),
            attrs.get("exclude_outside", 0), attrs.get("antialias", 0), fmt_i(attrs.get("axes", [])),
            fmt_f(roi or []), fmt_f(scales or []), fmt_i(sizes or []), fmt_i(shape), fmt_i(want.shape), fmt_f(want)))
    print("  };")
    print("  return r;")
    print("}")
    print("}  // namespace cpu_resize_refs")


if __name__ == "__main__":
    main()
