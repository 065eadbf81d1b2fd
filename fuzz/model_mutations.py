"""Typed structural mutations of ONNX models, for fuzz/mutate_models.py.

Each mutation takes (model, rng), changes the onnx.ModelProto in place and returns
a short description of what it did ("dims: input 'x' dim 1 -> -7"), or None when it
does not apply to this model (the driver then picks another). BYTE_MUTATIONS work
on the serialized file instead. Every choice comes from rng, so a mutation is
reproduced by its (seed, index).

What they aim at: the places where a loader, shape inference or a pass can trust
a file too much -- dims (huge, negative, zero, symbolic, rank changes), attributes
(extreme values, wrong type tags, missing, duplicated), dtypes, wiring (cycles,
missing names, empty names, duplicated outputs), opset imports, initializers
(dropped, duplicated, two value fields, raw_data of the wrong size, external data
pointing nowhere), op types and domains, and plain byte damage.
"""
import onnx
from onnx import AttributeProto, TensorProto

HUGE_INTS = [1 << 31, (1 << 31) - 1, 1 << 40, (1 << 62), (1 << 63) - 1, -(1 << 63)]
ODD_INTS = [-9, -7, -2, -1, 0, 1, 2, 3, 5, 99, 65536] + HUGE_INTS
ODD_FLOATS = [0.0, -0.0, -1.0, 1e-45, 1e30, -1e30, float("inf"), float("-inf"), float("nan")]
ODD_DTYPES = [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 16, 17, 19, 21, 23, 40, 99, -1]
OP_TYPES = ["Add", "Mul", "Sub", "Div", "Relu", "Reshape", "MatMul", "Gemm", "Softmax", "LayerNormalization",
            "Gather", "Transpose", "Concat", "Split", "Where", "Expand", "Slice", "Squeeze", "Unsqueeze",
            "Cast", "Shape", "ConstantOfShape", "Range", "Einsum", "Conv", "Pow", "Sqrt", "ReduceMean",
            "Attention", "RMSNormalization", "RotaryEmbedding", "If", "Loop", "NoSuchOp"]


# ---- helpers -------------------------------------------------------------------------------

def all_graphs(g):
    """The graph and every subgraph (If/Loop/Scan bodies), outermost first."""
    out = [g]
    for n in g.node:
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                out += all_graphs(a.g)
            elif a.type == AttributeProto.GRAPHS:
                for sg in a.graphs:
                    out += all_graphs(sg)
    return out


def all_nodes(m):
    return [n for g in all_graphs(m.graph) for n in g.node]


def value_names(g):
    return ([x.name for x in g.input] + [x.name for x in g.initializer] +
            [o for n in g.node for o in n.output if o])


def typed_values(m):
    """ValueInfoProtos with a tensor type: graph inputs, outputs, value_info."""
    g = m.graph
    return [v for v in list(g.input) + list(g.output) + list(g.value_info) if v.type.HasField("tensor_type")]


def pick(rng, seq):
    return seq[rng.randrange(len(seq))] if len(seq) else None


def odd_int(rng, unlike=None):
    return other(rng, ODD_INTS, unlike)


def other(rng, choices, current):
    """A choice that differs from the current value (a mutation must change something)."""
    return rng.choice([c for c in choices if c != current])


# ---- dims and dtypes ------------------------------------------------------------------------

def mutate_value_dims(m, rng):
    v = pick(rng, [v for v in typed_values(m) if v.type.tensor_type.HasField("shape")])
    if v is None:
        return None
    dims = v.type.tensor_type.shape.dim
    what = rng.randrange(4)
    if what == 0 and len(dims):
        d = pick(rng, dims)
        old = d.dim_value if d.HasField("dim_value") else d.dim_param
        new = other(rng, [0, 1, -1, -7, 1 << 40, (1 << 63) - 1], old)
        d.dim_value = new
        return f"dims: value '{v.name}' dim {old!r} -> {new}"
    if what == 1 and len(dims):
        d = pick(rng, dims)
        old = d.dim_param if d.HasField("dim_param") else None
        d.dim_param = other(rng, ["", "batch", "seq", "N*2", "-1", "\u00e9\u0000x"], old)
        return f"dims: value '{v.name}' a dim -> dim_param {d.dim_param!r}"
    if what == 2:
        v.type.tensor_type.shape.dim.add().dim_value = rng.choice([1, 3])
        return f"dims: value '{v.name}' rank + 1"
    if len(dims):
        del dims[rng.randrange(len(dims))]
        return f"dims: value '{v.name}' rank - 1"
    return None


def mutate_initializer_dims(m, rng):
    t = pick(rng, [t for g in all_graphs(m.graph) for t in g.initializer])
    if t is None:
        return None
    if len(t.dims) and rng.random() < 0.7:
        k = rng.randrange(len(t.dims))
        old = t.dims[k]
        t.dims[k] = other(rng, [0, 1, 3, -1, -5, 1 << 40, (1 << 62)], old)
        return f"initializer '{t.name}' dim {k}: {old} -> {t.dims[k]} (data unchanged)"
    if rng.random() < 0.5 or not len(t.dims):
        t.dims.append(rng.choice([1, 2]))
        return f"initializer '{t.name}' rank + 1"
    del t.dims[:]
    return f"initializer '{t.name}' dims cleared"


def mutate_value_dtype(m, rng):
    v = pick(rng, typed_values(m))
    if v is None:
        return None
    old = v.type.tensor_type.elem_type
    new = other(rng, ODD_DTYPES, old)
    v.type.tensor_type.elem_type = new if new >= 0 else (0 if old else 99)
    return f"dtype: value '{v.name}' {old} -> {v.type.tensor_type.elem_type}"


def mutate_initializer_dtype(m, rng):
    t = pick(rng, [t for g in all_graphs(m.graph) for t in g.initializer])
    if t is None:
        return None
    old = t.data_type
    t.data_type = max(0, other(rng, ODD_DTYPES + [0], old)) if old else other(rng, ODD_DTYPES[1:], old)
    return f"initializer '{t.name}' data_type {old} -> {t.data_type} (data unchanged)"


def mutate_value_type_kind(m, rng):
    v = pick(rng, typed_values(m))
    if v is None:
        return None
    what = rng.randrange(3)
    if what == 0:
        v.type.ClearField("tensor_type")
        v.type.sequence_type.elem_type.tensor_type.elem_type = TensorProto.FLOAT
        return f"type: value '{v.name}' tensor -> sequence(tensor(float))"
    if what == 1 and v.type.tensor_type.HasField("shape"):
        v.type.tensor_type.ClearField("shape")
        return f"type: value '{v.name}' shape removed"
    v.ClearField("type")
    return f"type: value '{v.name}' type removed"


# ---- attributes -------------------------------------------------------------------------------

def mutate_attribute_value(m, rng):
    n = pick(rng, [n for n in all_nodes(m) if len(n.attribute)])
    if n is None:
        return None
    a = pick(rng, n.attribute)
    where = f"node '{n.name}' ({n.op_type}) attribute '{a.name}'"
    if a.type == AttributeProto.INT:
        a.i = odd_int(rng, a.i)
        return f"{where} = {a.i}"
    if a.type == AttributeProto.INTS:
        if len(a.ints) and rng.random() < 0.6:
            k = rng.randrange(len(a.ints))
            a.ints[k] = odd_int(rng, a.ints[k])
        elif rng.random() < 0.5 or not len(a.ints):
            a.ints.append(odd_int(rng))
        else:
            del a.ints[:]
        return f"{where} = {list(a.ints)[:8]}"
    if a.type == AttributeProto.FLOAT:
        a.f = rng.choice([f for f in ODD_FLOATS if f != a.f or f != f])  # NaN never equals itself
        return f"{where} = {a.f}"
    if a.type == AttributeProto.FLOATS:
        a.floats.append(rng.choice(ODD_FLOATS))
        return f"{where} + one float"
    if a.type == AttributeProto.STRING:
        a.s = other(rng, [b"", b"NOSUCH", b"\xff\xfe", b"x" * 300], a.s)
        return f"{where} = {a.s[:16]!r}"
    if a.type == AttributeProto.TENSOR:
        t = a.t
        if len(t.dims):
            k = rng.randrange(len(t.dims))
            t.dims[k] = other(rng, [0, 7, -1, 1 << 40], t.dims[k])
        else:
            t.dims.append(rng.choice([0, 2, 1 << 40]))
        return f"{where} tensor dims -> {list(t.dims)}"
    return None


def mutate_attribute_type(m, rng):
    """The type tag says one thing, the value fields another."""
    n = pick(rng, [n for n in all_nodes(m) if len(n.attribute)])
    if n is None:
        return None
    a = pick(rng, n.attribute)
    old = a.type
    a.type = other(rng, [AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.STRING, AttributeProto.INTS,
                         AttributeProto.FLOATS, AttributeProto.TENSOR, AttributeProto.GRAPH,
                         AttributeProto.UNDEFINED], old)
    return f"node '{n.name}' ({n.op_type}) attribute '{a.name}' type {old} -> {a.type} (value fields unchanged)"


def mutate_attribute_set(m, rng):
    """Remove, duplicate or add attributes."""
    n = pick(rng, all_nodes(m))
    if n is None:
        return None
    what = rng.randrange(3)
    if what == 0 and len(n.attribute):
        k = rng.randrange(len(n.attribute))
        name = n.attribute[k].name
        del n.attribute[k]
        return f"node '{n.name}' ({n.op_type}) attribute '{name}' removed"
    if what == 1 and len(n.attribute):
        a = pick(rng, n.attribute)
        n.attribute.add().CopyFrom(a)
        return f"node '{n.name}' ({n.op_type}) attribute '{a.name}' twice"
    a = n.attribute.add()
    a.name = rng.choice(["axis", "perm", "epsilon", "to", "transB", "nosuch", ""])
    a.type, a.i = AttributeProto.INT, odd_int(rng)
    return f"node '{n.name}' ({n.op_type}) + attribute '{a.name}' = {a.i}"


# ---- wiring, op types, nodes --------------------------------------------------------------------

def mutate_rewire(m, rng):
    g = m.graph
    n = pick(rng, g.node)
    if n is None:
        return None
    names = value_names(g)
    what = rng.randrange(5)
    if what == 0 and len(n.input):
        k = rng.randrange(len(n.input))
        n.input[k] = pick(rng, names)  # may create a cycle
        return f"node '{n.name}' ({n.op_type}) input {k} -> '{n.input[k]}'"
    if what == 1 and len(n.input):
        k = rng.randrange(len(n.input))
        n.input[k] = rng.choice(["no_such_value", ""])
        return f"node '{n.name}' ({n.op_type}) input {k} -> {n.input[k]!r}"
    if what == 2:
        n.input.append(pick(rng, names))
        return f"node '{n.name}' ({n.op_type}) + input '{n.input[-1]}'"
    if what == 3 and len(n.input):
        del n.input[rng.randrange(len(n.input))]
        return f"node '{n.name}' ({n.op_type}) one input removed"
    if len(n.output):
        k = rng.randrange(len(n.output))
        n.output[k] = rng.choice([pick(rng, names), ""])
        return f"node '{n.name}' ({n.op_type}) output {k} -> {n.output[k]!r}"
    return None


def mutate_graph_io(m, rng):
    g = m.graph
    what = rng.randrange(4)
    if what == 0 and len(g.output):
        o = pick(rng, g.output)
        o.name = rng.choice(["no_such_value", ""] + [x.name for x in g.input])
        return f"graph output -> {o.name!r}"
    if what == 1 and len(g.output):
        g.output.add().CopyFrom(pick(rng, g.output))
        return f"graph output '{g.output[-1].name}' listed twice"
    if what == 2 and len(g.input):
        g.input.add().CopyFrom(pick(rng, g.input))
        return f"graph input '{g.input[-1].name}' listed twice"
    if len(g.input):
        k = rng.randrange(len(g.input))
        name = g.input[k].name
        del g.input[k]
        return f"graph input '{name}' removed"
    return None


def mutate_op_type(m, rng):
    n = pick(rng, all_nodes(m))
    if n is None:
        return None
    old = n.op_type
    if rng.random() < 0.8:
        n.op_type = other(rng, OP_TYPES, old)
        return f"node '{n.name}' op {old} -> {n.op_type}"
    n.domain = other(rng, ["fuseopt", "com.microsoft", "ai.onnx", "no.such.domain", "ai.onnx.ml"], n.domain)
    return f"node '{n.name}' ({old}) domain -> {n.domain!r}"


def mutate_nodes(m, rng):
    g = m.graph
    if not len(g.node):
        return None
    k = rng.randrange(len(g.node))
    n = g.node[k]
    what = rng.randrange(3)
    if what == 0:
        del g.node[k]
        return f"node '{n.name}' ({n.op_type}) removed"
    if what == 1:
        g.node.add().CopyFrom(n)
        return f"node '{n.name}' ({n.op_type}) twice (same outputs)"
    j = rng.randrange(len(g.node))
    if j == k:
        return None
    a, b = onnx.NodeProto(), onnx.NodeProto()
    a.CopyFrom(g.node[k])
    b.CopyFrom(g.node[j])
    g.node[k].CopyFrom(b)
    g.node[j].CopyFrom(a)
    return f"nodes {k} and {j} swapped (file order)"


# ---- model-level fields -----------------------------------------------------------------------

def mutate_opset(m, rng):
    what = rng.randrange(5)
    default = [o for o in m.opset_import if o.domain in ("", "ai.onnx")]
    if what == 0 and default:
        old = default[0].version
        default[0].version = other(rng, [0, 1, 6, 11, 12, 16, 24, 99, -1, 1 << 40], old)
        return f"opset: default {old} -> {default[0].version}"
    if what == 1 and default:
        m.opset_import.remove(default[0])
        return "opset: default-domain import removed"
    if what == 2:
        o = m.opset_import.add()
        o.domain, o.version = "", rng.choice([13, 17, 18])
        return f"opset: a second default-domain import ({o.version})"
    if what == 3:
        o = m.opset_import.add()
        o.domain, o.version = rng.choice(["fuseopt", "com.microsoft", "no.such"]), rng.choice([0, 1, 99])
        return f"opset: + import {o.domain} {o.version}"
    old = m.ir_version
    m.ir_version = other(rng, [0, 1, 3, 4, 7, 11, 99, -1], old)
    return f"ir_version {old} -> {m.ir_version}"


def mutate_initializer_set(m, rng):
    g = m.graph
    if not len(g.initializer):
        return None
    k = rng.randrange(len(g.initializer))
    t = g.initializer[k]
    what = rng.randrange(4)
    if what == 0:
        name = t.name
        del g.initializer[k]
        return f"initializer '{name}' dropped"
    if what == 1:
        g.initializer.add().CopyFrom(t)
        return f"initializer '{t.name}' twice"
    if what == 2 and len(g.input):
        old, t.name = t.name, pick(rng, g.input).name
        return f"initializer '{old}' renamed to graph input '{t.name}'"
    s = g.sparse_initializer.add()
    s.values.CopyFrom(t)
    s.dims.extend(t.dims)
    return f"initializer '{t.name}' also as a sparse initializer"


def mutate_tensor_data(m, rng):
    """Two value fields, raw_data of the wrong size, typed data of the wrong length, external data."""
    ts = [t for g in all_graphs(m.graph) for t in g.initializer]
    ts += [a.t for n in all_nodes(m) for a in n.attribute if a.type == AttributeProto.TENSOR]
    t = pick(rng, ts)
    if t is None:
        return None
    what = rng.randrange(6)
    if what == 0:
        t.float_data.extend([1.0, 2.0])
        t.int64_data.extend([3])
        return f"tensor '{t.name}': raw/typed data and float_data and int64_data at once"
    if what == 1 and t.HasField("raw_data") and len(t.raw_data):
        cut = rng.choice([1, len(t.raw_data) // 2, len(t.raw_data) - 1])
        t.raw_data = t.raw_data[:cut]
        return f"tensor '{t.name}': raw_data cut to {cut} bytes"
    if what == 2:
        t.raw_data = t.raw_data + bytes(rng.choice([1, 3, 8]))
        return f"tensor '{t.name}': raw_data grown"
    if what == 3:
        t.ClearField("raw_data")
        for f in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
            t.ClearField(f)
        return f"tensor '{t.name}': no data at all"
    if what == 4:
        t.string_data.append(b"\x00\xff")
        return f"tensor '{t.name}': + string_data"
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    for k, v in rng.choice([[("location", "no_such.data")], [("location", "../../../etc/passwd")],
                            [("location", "/dev/zero"), ("length", str(1 << 40))],
                            [("location", "model.onnx"), ("offset", "-5")], []]):
        e = t.external_data.add()
        e.key, e.value = k, v
    return f"tensor '{t.name}': external data {[(e.key, e.value) for e in t.external_data]}"


STRUCTURAL = [
    mutate_value_dims, mutate_initializer_dims, mutate_value_dtype, mutate_initializer_dtype,
    mutate_value_type_kind, mutate_attribute_value, mutate_attribute_type, mutate_attribute_set,
    mutate_rewire, mutate_graph_io, mutate_op_type, mutate_nodes, mutate_opset, mutate_initializer_set,
    mutate_tensor_data,
]


# ---- bytes ------------------------------------------------------------------------------------

def damage_bytes(data, rng):
    b = bytearray(data)
    what = rng.randrange(4)
    if what == 0:
        for _ in range(rng.randint(1, 16)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b), "bytes: up to 16 flipped"
    if what == 1:
        cut = rng.randrange(1, len(b))
        return bytes(b[:cut]), f"bytes: truncated to {cut}"
    if what == 2:
        at = rng.randrange(len(b))
        return bytes(b[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) + b[at:]), \
            f"bytes: garbage inserted at {at}"
    # A varint length field made huge: the first byte after a tag 0x0a/0x12/0x1a.
    spots = [i for i in range(len(b) - 1) if b[i] in (0x0A, 0x12, 0x1A, 0x22, 0x3A, 0x42)]
    if not spots:
        return bytes(b), "bytes: unchanged"
    i = spots[rng.randrange(len(spots))] + 1
    b[i:i + 1] = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])
    return bytes(b), f"bytes: length field at {i} -> 2^32-1"


def kind_name(fn):
    return fn.__name__.replace("mutate_", "")


def mutate(base, rng):
    """One mutated model: (bytes, description ('; '-joined), kind of the first mutation).
    1 in 8 is byte damage of the serialized model, the rest 1-3 structural mutations."""
    if rng.random() < 0.125:
        data, what = damage_bytes(base.SerializeToString(), rng)
        return data, what, "bytes"
    m = onnx.ModelProto()
    m.CopyFrom(base)
    done, kinds = [], []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        for _attempt in range(8):
            fn = rng.choice(STRUCTURAL)
            what = fn(m, rng)
            if what:
                done.append(what)
                kinds.append(kind_name(fn))
                break
    return m.SerializeToString(), "; ".join(done) or "none", kinds[0] if kinds else "none"
