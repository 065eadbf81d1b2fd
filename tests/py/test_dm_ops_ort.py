"""The CPU data-movement / shape / logic kernels against ONNX Runtime, op by op.

Each case is a one-node model at the opset where the spelling under test
exists (attributes vs inputs: Squeeze/Unsqueeze axes, Split split, Slice,
Pad, Reshape), with seeded random inputs. ONNX Runtime computes the
reference; `fuserun --backend cpu --check` must reproduce it exactly for
integer/bool outputs and within 1e-6 for floats (these ops move data, they do
no arithmetic). Integer parameters (shapes, axes, pads...) are initializers,
as exporters write them."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def cases(np, helper, TP):
    rng = np.random.default_rng(7)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def i64(v):
        return np.array(v, dtype=np.int64)

    nan = np.float32("nan")
    # (name, opset, op, graph inputs [(name, array)], then initializer inputs [(name, array) or None for an
    #  omitted slot], attrs, n_outputs); the node reads them in that order.
    c = []
    add = lambda name, opset, op, data, consts=(), attrs=None, nout=1: c.append(
        (name, opset, op, list(data), list(consts), attrs or {}, nout))

    add("gather_neg_axis1", 13, "Gather", [("x", f32(5, 4, 3))], [("i", i64([[0, -1, 2], [3, 1, -4]]))], {"axis": 1})
    add("gather_scalar_idx", 13, "Gather", [("x", f32(5, 4))], [("i", i64(-2))])
    add("gather_elements", 13, "GatherElements", [("x", f32(3, 4))], [("i", i64([[1, 0, 3], [-1, 2, 2]]))], {"axis": -1})
    add("gather_nd_b1", 13, "GatherND", [("x", f32(2, 3, 4))], [("i", i64([[[1, 2], [0, -1]], [[2, 0], [1, 3]]]))],
        {"batch_dims": 1})
    add("scatter_nd", 13, "ScatterND", [("x", f32(4, 3))], [("i", i64([[2], [0]])), ("u", f32(2, 3))])
    add("scatter_nd_add", 16, "ScatterND", [("x", f32(4, 3))], [("i", i64([[2], [0], [2]])), ("u", f32(3, 3))],
        {"reduction": "add"})
    add("scatter_elements", 13, "ScatterElements", [("x", f32(3, 3))],
        [("i", i64([[1, 0, 2], [0, 2, 1]])), ("u", f32(2, 3))])
    add("reshape_0_m1", 14, "Reshape", [("x", f32(2, 3, 4))], [("s", i64([0, -1, 2]))])
    add("reshape_allowzero", 14, "Reshape", [("x", f32(0, 3))], [("s", i64([3, 0]))], {"allowzero": 1})
    add("transpose", 13, "Transpose", [("x", f32(2, 3, 4, 5))], [], {"perm": [0, 2, 3, 1]})
    add("transpose_default", 13, "Transpose", [("x", f32(3, 1, 5))])
    add("tile", 13, "Tile", [("x", f32(2, 3))], [("r", i64([3, 2]))])
    add("pad_reflect", 13, "Pad", [("x", f32(3, 4))], [("p", i64([2, 1, 1, 3]))], {"mode": "reflect"})
    add("pad_edge", 13, "Pad", [("x", f32(3, 4))], [("p", i64([0, 2, 3, 1]))], {"mode": "edge"})
    add("pad_const", 13, "Pad", [("x", f32(2, 3, 4))], [("p", i64([0, 1, -1, 1, 0, 2])), ("v", np.float32(1.5))])
    add("pad_attr_opset2", 2, "Pad", [("x", f32(2, 3))], [], {"pads": [1, 0, 0, 2], "value": -3.0})
    add("pad_axes_opset18", 18, "Pad", [("x", f32(2, 3, 4))], [("p", i64([1, 2, 0, 1])), None, ("a", i64([-1, 0]))])
    add("unsqueeze_attr", 11, "Unsqueeze", [("x", f32(3, 4))], [], {"axes": [0, -1]})
    add("unsqueeze_input", 13, "Unsqueeze", [("x", f32(3, 4))], [("a", i64([1, -1]))])
    add("squeeze_attr", 11, "Squeeze", [("x", f32(1, 3, 1, 4))], [], {"axes": [-2]})
    add("squeeze_input", 13, "Squeeze", [("x", f32(1, 3, 1, 4))], [("a", i64([0]))])
    add("squeeze_all", 13, "Squeeze", [("x", f32(1, 3, 1, 4))])
    add("flatten", 13, "Flatten", [("x", f32(2, 3, 4))], [], {"axis": -2})
    add("concat", 13, "Concat", [("a", f32(2, 1, 3)), ("b", f32(2, 4, 3)), ("c", f32(2, 0, 3))], [], {"axis": -2})
    add("split_attr", 11, "Split", [("x", f32(2, 7))], [], {"axis": 1, "split": [3, 4]}, 2)
    add("split_input", 13, "Split", [("x", f32(6, 2))], [("s", i64([1, 2, 3]))], {"axis": 0}, 3)
    add("split_equal", 13, "Split", [("x", f32(2, 6))], [], {"axis": -1}, 3)
    add("split_num_outputs", 18, "Split", [("x", f32(7, 2))], [], {"num_outputs": 3}, 3)
    add("slice_attrs_opset1", 1, "Slice", [("x", f32(4, 5, 6))], [], {"starts": [1, -4], "ends": [1000, -1], "axes": [0, 2]})
    add("slice_neg_steps", 13, "Slice", [("x", f32(4, 5, 6))],
        [("s", i64([-1, 4])), ("e", i64([-2**63, 0])), ("a", i64([0, -1])), ("t", i64([-1, -2]))])
    add("slice_clamp", 13, "Slice", [("x", f32(4, 5))], [("s", i64([-100, 1])), ("e", i64([2**63 - 1, 100]))])
    add("expand", 13, "Expand", [("x", f32(3, 1))], [("s", i64([2, 1, 4]))])
    add("where_f32", 16, "Where", [("c", rng.random((2, 1, 4)) > 0.5), ("x", f32(3, 1)), ("y", f32(4))])
    add("where_i64", 16, "Where", [("c", rng.random((3,)) > 0.5), ("x", i64([1, 2, 3])), ("y", i64([-7]))])
    add("cast_f16", 13, "Cast", [("x", f32(3, 4) * 100)], [], {"to": TP.FLOAT16})
    add("cast_from_f16", 13, "Cast", [("x", (f32(3, 4) * 100).astype(np.float16))], [], {"to": TP.FLOAT})
    # (bfloat16 is checked in tests/kernels/cpu_cast_test.cc: ORT cannot hand bf16 to numpy.)
    add("cast_i32", 13, "Cast", [("x", f32(3, 4) * 10)], [], {"to": TP.INT32})
    add("cast_bool", 13, "Cast", [("x", np.array([0, 1.5, -0.0, 2], np.float32))], [], {"to": TP.BOOL})
    add("cast_bool_i64", 13, "Cast", [("x", np.array([True, False]))], [], {"to": TP.INT64})
    add("cast_i64_f32", 13, "Cast", [("x", i64([-3, 0, 1 << 20]))], [], {"to": TP.FLOAT})
    add("cast_f64_f32", 13, "Cast", [("x", rng.standard_normal(5))], [], {"to": TP.FLOAT})
    for op in ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"):
        a = np.round(f32(2, 1, 3))
        add(op.lower() + "_f32", 16, op, [("a", a), ("b", np.round(f32(4, 1)))])
        add(op.lower() + "_i64", 16, op, [("a", i64([[1, 2, 3]])), ("b", i64([[2], [3]]))])
    for op in ("And", "Or", "Xor"):
        add(op.lower(), 13, op, [("a", rng.random((2, 1, 3)) > 0.5), ("b", rng.random((4, 1)) > 0.5)])
    add("not", 13, "Not", [("a", rng.random((2, 3)) > 0.5)])
    add("isnan", 13, "IsNaN", [("x", np.array([1, nan, np.inf, 0], np.float32))])
    add("range_f32", 13, "Range", [], [("s", np.float32(1)), ("l", np.float32(-2)), ("d", np.float32(-0.7))])
    add("range_i64", 13, "Range", [], [("s", i64(3)), ("l", i64(20)), ("d", i64(4))])
    add("shape_start_end", 15, "Shape", [("x", f32(2, 3, 4, 5))], [], {"start": 1, "end": -1})
    add("size", 13, "Size", [("x", f32(2, 3, 4))])
    add("constant_of_shape", 13, "ConstantOfShape", [], [("s", i64([2, 3]))],
        {"value": helper.make_tensor("v", TP.INT64, [1], [5])})
    add("constant_ints", 13, "Constant", [], [], {"value_ints": [4, -1, 8]})
    add("identity", 13, "Identity", [("x", f32(2, 3))])
    add("dropout_mask", 13, "Dropout", [("x", f32(2, 3))], [], {}, 2)
    add("trilu_upper_k", 14, "Trilu", [("x", f32(2, 4, 5))], [("k", i64(1))])
    add("trilu_lower_k", 14, "Trilu", [("x", f32(4, 5))], [("k", i64(-1))], {"upper": 0})
    add("nonzero", 13, "NonZero", [("x", np.array([[0, 1, 0], [2, 0, 3]], np.float32))])
    add("onehot", 11, "OneHot", [("i", i64([[0, 3], [-1, 7]]))], [("d", i64(4)), ("v", np.array([0, 2], np.float32))],
        {"axis": 1})
    add("compress", 11, "Compress", [("x", f32(3, 4))], [("c", np.array([True, False, True]))], {"axis": 0})
    add("eyelike", 9, "EyeLike", [("x", f32(3, 5))], [], {"k": 2})
    add("depth_to_space", 13, "DepthToSpace", [("x", f32(2, 8, 2, 3))], [], {"blocksize": 2, "mode": "CRD"})
    add("space_to_depth", 13, "SpaceToDepth", [("x", f32(1, 3, 4, 6))], [], {"blocksize": 2})
    random_cases(np, helper, rng, add, f32, i64)
    return c


def random_cases(np, helper, rng, add, f32, i64):
    """Seeded random shapes for the ops with the most index arithmetic."""
    big, small = 2**63 - 1, -2**63

    def dims(lo, hi, rank):
        return [int(d) for d in rng.integers(lo, hi + 1, size=rank)]

    for k in range(30):  # Slice: any rank, empty dims, clamping, negative steps
        shape = dims(0, 6, int(rng.integers(1, 5)))
        r = len(shape)
        n = int(rng.integers(1, r + 1))
        axes = [int(a) for a in rng.permutation(r)[:n]]
        axes = [a - r if rng.random() < 0.4 else a for a in axes]
        steps = [int(rng.choice([-3, -2, -1, 1, 1, 2, 3])) for _ in range(n)]
        starts = [int(rng.choice([rng.integers(-8, 9), small, big])) if rng.random() < 0.2
                  else int(rng.integers(-8, 9)) for _ in range(n)]
        ends = [int(rng.choice([small, big])) if rng.random() < 0.3 else int(rng.integers(-8, 9)) for _ in range(n)]
        add(f"rand_slice_{k}", 13, "Slice", [("x", f32(*shape))],
            [("s", i64(starts)), ("e", i64(ends)), ("a", i64(axes)), ("t", i64(steps))])
    for k in range(15):  # Transpose: random permutations up to rank 5
        shape = dims(1, 4, int(rng.integers(1, 6)))
        add(f"rand_transpose_{k}", 13, "Transpose", [("x", f32(*shape))], [],
            {"perm": [int(p) for p in rng.permutation(len(shape))]})
    for k in range(15):  # Pad: constant/edge with crops, reflect within ONNX Runtime's limits
        mode = ["constant", "edge", "reflect"][k % 3]
        shape = dims(2, 5, int(rng.integers(1, 4)))
        if mode == "reflect":
            pads = [int(rng.integers(0, d)) for d in shape] + [int(rng.integers(0, d)) for d in shape]
        else:
            pads = [int(rng.integers(-1, 4)) for _ in range(2 * len(shape))]
        add(f"rand_pad_{mode}_{k}", 13, "Pad", [("x", f32(*shape))], [("p", i64(pads))], {"mode": mode})
    for k in range(15):  # Gather: any axis, index tensors of rank 0..2 with negatives
        shape = dims(1, 5, int(rng.integers(1, 4)))
        axis = int(rng.integers(-len(shape), len(shape)))
        d = shape[axis]
        idx = rng.integers(-d, d, size=dims(1, 3, int(rng.integers(0, 3))))
        add(f"rand_gather_{k}", 13, "Gather", [("x", f32(*shape))], [("i", i64(idx))], {"axis": axis})
    for k in range(15):  # Where and Expand: random numpy-broadcastable shapes
        out = dims(1, 4, int(rng.integers(1, 5)))

        def part():
            r = int(rng.integers(0, len(out) + 1))
            return [1 if rng.random() < 0.4 else d for d in out[len(out) - r:]]
        add(f"rand_where_{k}", 16, "Where", [("c", rng.random(part()) > 0.5), ("x", f32(*part())), ("y", f32(*part()))])
        add(f"rand_expand_{k}", 13, "Expand", [("x", f32(*part()))], [("s", i64(part() if k % 2 else out))])
        a, b = part(), part()
        op = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"][k % 5]
        add(f"rand_{op.lower()}_{k}", 16, op, [("a", np.round(f32(*a))), ("b", np.round(f32(*b)))])
    for k in range(10):  # GatherElements / GatherND / ScatterND / ScatterElements
        shape = dims(1, 4, int(rng.integers(1, 4)))
        axis = int(rng.integers(-len(shape), len(shape)))
        ishape = [int(rng.integers(1, d + 1)) for d in shape]
        ishape[axis] = int(rng.integers(1, 5))
        idx = rng.integers(-shape[axis], shape[axis], size=ishape)
        add(f"rand_gather_elements_{k}", 13, "GatherElements", [("x", f32(*shape))], [("i", i64(idx))], {"axis": axis})
        depth = int(rng.integers(1, len(shape) + 1))
        tuples = np.stack([rng.integers(-d, d, size=(3,)) for d in shape[:depth]], axis=-1)
        add(f"rand_gather_nd_{k}", 13, "GatherND", [("x", f32(*shape))], [("i", i64(tuples))])
        uniq = np.array(sorted({tuple(t) for t in (tuples % np.array(shape[:depth])).tolist()}), dtype=np.int64)
        add(f"rand_scatter_nd_{k}", 13, "ScatterND", [("x", f32(*shape))],
            [("i", uniq), ("u", f32(len(uniq), *shape[depth:]))])
    for k in range(10):  # Split / Concat / Tile / Squeeze / Unsqueeze / Trilu
        shape = dims(1, 5, int(rng.integers(1, 4)))
        axis = int(rng.integers(-len(shape), len(shape)))
        d = shape[axis]
        cut = int(rng.integers(0, d + 1))
        add(f"rand_split_{k}", 13, "Split", [("x", f32(*shape))], [("s", i64([cut, d - cut]))], {"axis": axis}, 2)
        other = list(shape)
        other[axis] = int(rng.integers(0, 4))
        add(f"rand_concat_{k}", 13, "Concat", [("a", f32(*shape)), ("b", f32(*other))], [], {"axis": axis})
        add(f"rand_tile_{k}", 13, "Tile", [("x", f32(*shape))], [("r", i64(dims(0, 3, len(shape))))])
        with_ones = list(shape)
        with_ones.insert(int(rng.integers(0, len(shape) + 1)), 1)
        add(f"rand_squeeze_{k}", 13, "Squeeze", [("x", f32(*with_ones))])
        out_rank = len(shape) + 2
        uaxes = [int(a) - (out_rank if rng.random() < 0.5 else 0) for a in rng.permutation(out_rank)[:2]]
        add(f"rand_unsqueeze_{k}", 13, "Unsqueeze", [("x", f32(*shape))], [("a", i64(uaxes))])
        add(f"rand_trilu_{k}", 14, "Trilu", [("x", f32(*dims(1, 3, 1), *dims(1, 6, 2)))],
            [("k", i64(int(rng.integers(-4, 5))))], {"upper": k % 2})
    # Cast between every pair of numeric types and bool, values in range of both
    # (out-of-range float->int is undefined in ONNX).
    types = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
             np.int64, np.uint64, np.bool_]
    # One model per source type with a Cast to every type ("to_all": one node per target).
    to_all = [helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in types]
    for src in types:
        if src is np.bool_:
            x = rng.random(7) > 0.5
        elif np.issubdtype(src, np.floating):
            x = np.concatenate([rng.uniform(0, 100, 5), [0.0, 99.75]]).astype(src)
        else:
            x = np.concatenate([rng.integers(0, 101, 5), [0, 100]]).astype(src)
        add(f"cast_{np.dtype(src).name}_to_all", 13, "Cast", [("x", x)], [], {"to_all": to_all}, len(types))
    signed = [np.float32, np.float64, np.float16, np.int8, np.int32, np.int64, np.bool_]
    for src in signed[:-1]:  # negatives, into the signed types
        x = (np.array([-100, -1.5, -0.5, 0, 3.25]) if np.issubdtype(src, np.floating) else
             np.array([-100, -2, -1, 0, 3])).astype(src)
        add(f"cast_neg_{np.dtype(src).name}_to_signed", 13, "Cast", [("x", x)], [],
            {"to_all": [helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in signed]}, len(signed))
    # Other dtypes exporters produce: the byte-moving ops must not care, the
    # comparisons must compare values.
    for t in (np.float64, np.float16, np.int32, np.int8, np.uint8, np.bool_):
        n = np.dtype(t).name
        a = (rng.random((2, 3)) > 0.5) if t is np.bool_ else (rng.standard_normal((2, 3)) * 4).astype(t)
        b = (rng.random((3,)) > 0.5) if t is np.bool_ else (rng.standard_normal((3,)) * 4).astype(t)
        add(f"dtype_where_{n}", 16, "Where", [("c", rng.random((2, 1)) > 0.5), ("x", a), ("y", b)])
        add(f"dtype_gather_{n}", 13, "Gather", [("x", a)], [("i", i64([2, -3, 1]))], {"axis": 1})
        add(f"dtype_concat_{n}", 13, "Concat", [("a", a), ("b", a)], [], {"axis": 0})
        add(f"dtype_transpose_{n}", 13, "Transpose", [("x", a)])
        add(f"dtype_equal_{n}", 13, "Equal", [("a", a), ("b", b)])
        if t is not np.bool_:
            add(f"dtype_less_{n}", 13, "Less", [("a", a), ("b", b)])
            add(f"dtype_greater_or_equal_{n}", 16, "GreaterOrEqual", [("a", a), ("b", b)])
    for k in range(8):  # Range with float steps (length and rounding as ONNX Runtime computes them)
        start, delta = float(rng.uniform(-5, 5)), float(rng.choice([-1, 1]) * rng.uniform(0.1, 2))
        limit = start + delta * float(rng.uniform(0, 12))
        add(f"rand_range_{k}", 13, "Range", [],
            [("s", np.float32(start)), ("l", np.float32(limit)), ("d", np.float32(delta))])


def build(onnx, helper, numpy_helper, case):
    name, opset, op, data, consts, attrs, nout = case
    inputs, inits, node_in = [], [], []
    for n, a in data:
        inputs.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
        node_in.append(n)
    for item in consts:
        if item is None:
            node_in.append("")
            continue
        n, a = item
        inits.append(numpy_helper.from_array(a, n))
        node_in.append(n)
    outs = [f"y{i}" for i in range(nout)]
    if "to_all" in attrs:  # one Cast per target type
        nodes = [helper.make_node(op, node_in, [o], name=f"{name}_{i}", to=t)
                 for i, (o, t) in enumerate(zip(outs, attrs["to_all"]))]
    else:
        nodes = [helper.make_node(op, node_in, outs, name=name, **attrs)]
    graph = helper.make_graph(nodes, name, inputs, [], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    # Output types come from ONNX shape inference (the node's outputs are
    # intermediate values until they are declared).
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    for o in outs:
        assert o in inferred, f"{name}: ONNX shape inference rejects the case"
        model.graph.output.add().CopyFrom(inferred[o])
    return model


def main():
    args = lib.parse_args()
    np, onnx, _ = lib.require("numpy", "onnx", "onnxruntime")
    from onnx import helper, numpy_helper, TensorProto as TP
    fuserun = os.path.join(args.bin, "fuserun")
    failures = []
    skipped = 0
    all_cases = [c for c in cases(np, helper, TP) if args.k in c[0]]
    with tempfile.TemporaryDirectory() as tmp:
        for case in all_cases:
            name, data = case[0], case[3]
            d = os.path.join(tmp, name)
            os.makedirs(os.path.join(d, "test_data_set_0"))
            model = build(onnx, helper, numpy_helper, case)
            path = os.path.join(d, "model.onnx")
            onnx.save(model, path)
            try:
                want = lib.run_ort(path, [a for _, a in data])
            except Exception as e:  # ONNX Runtime lacks a few dtype variants (Where on bool...)
                if "NOT_IMPLEMENTED" not in str(e):
                    raise
                print(f"skip {name} (ONNX Runtime has no kernel)")
                skipped += 1
                continue
            for i, (n, a) in enumerate(data):
                with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(np.asarray(a), n).SerializeToString())
            for i, w in enumerate(want):
                with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(np.asarray(w), f"y{i}").SerializeToString())
            r = subprocess.run([fuserun, path, "--backend", "cpu", "-q", "--check", os.path.join(d, "test_data_set_0"),
                                "--rtol", "1e-6"], capture_output=True, text=True, timeout=120)
            status = "ok" if r.returncode == 0 else "FAIL"
            print(f"{status:4} {name}")
            if r.returncode != 0:
                failures.append(f"{name}: rc {r.returncode}: {(r.stdout + r.stderr).strip()[-600:]}")
    print(f"{len(all_cases) - len(failures) - skipped}/{len(all_cases) - skipped} cases match ONNX Runtime"
          f" ({skipped} skipped: no ONNX Runtime kernel)")
    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
