"""What fuseopt must keep when it writes a model (issue 2 item 3), checked on a
model built here with the onnx package, through `--passes none` and through the
full default pipeline:
- model metadata: producer_name/version, domain, model_version, doc_string,
  metadata_props, the graph's name and doc_string, node doc_strings;
- unknown fields (a newer ONNX's fields this build does not know) on the
  ModelProto and on the GraphProto, byte for byte;
- subgraph attributes of If and Loop (with outer-scope reads and a nested If)
  byte for byte, and the outer values they read;
- model-local functions (custom domain, with an IR-10 overload) and their opset
  import; nodes keep NodeProto.overload and metadata_props (IR-10 fields that
  Debian's libonnx classes do not know: kept as unknown fields);
- ONNX Runtime runs the output to the input's outputs (both If branches, and
  several loop trip counts);
- determinism: two runs give identical bytes; the input file is never modified."""
import hashlib
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

MODEL_MARKER = b"fuseopt-test: unknown ModelProto field 99"
GRAPH_MARKER = b"fuseopt-test: unknown GraphProto field 98"


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def len_field(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def build(onnx, helper, TP, numpy_helper, np):
    vi = helper.make_tensor_value_info
    # A model-local function in a custom domain: y = x * 3 + 1.
    fn = helper.make_function(
        "com.example.custom", "ScaleShift", ["x"], ["y"],
        [helper.make_node("Constant", [], ["three"], value=numpy_helper.from_array(np.array(3.0, np.float32))),
         helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1.0, np.float32))),
         helper.make_node("Mul", ["x", "three"], ["t"]),
         helper.make_node("Add", ["t", "one"], ["y"])],
        opset_imports=[helper.make_opsetid("", 17)])
    # IR-10 overload of the same function: y = 1 - 3x. A node calling it must keep
    # NodeProto.overload (a field Debian's libonnx classes do not know) or it
    # would silently call the other body.
    fn_neg = helper.make_function(
        "com.example.custom", "ScaleShift", ["x"], ["y"],
        [helper.make_node("Constant", [], ["three"], value=numpy_helper.from_array(np.array(-3.0, np.float32))),
         helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1.0, np.float32))),
         helper.make_node("Mul", ["x", "three"], ["t"]),
         helper.make_node("Add", ["t", "one"], ["y"])],
        opset_imports=[helper.make_opsetid("", 17)])
    fn_neg.overload = "negated"
    inner_then = helper.make_graph([helper.make_node("Mul", ["scaled", "gate"], ["it"], name="inner.mul")],
                                   "inner_then", [], [vi("it", TP.FLOAT, [4])])
    inner_else = helper.make_graph([helper.make_node("Sub", ["scaled", "gate"], ["ie"], name="inner.sub")],
                                   "inner_else", [], [vi("ie", TP.FLOAT, [4])])
    then_g = helper.make_graph(
        [helper.make_node("Greater", ["total", "zero"], ["pos"], name="then.greater"),
         helper.make_node("If", ["pos"], ["nested"], name="then.if", then_branch=inner_then, else_branch=inner_else,
                          doc_string="nested if")],
        "then", [], [vi("nested", TP.FLOAT, [4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["scaled"], ["e"], name="else.neg")], "else", [],
                               [vi("e", TP.FLOAT, [4])])
    # Loop: acc_{i+1} = acc_i * decay + step (decay read from the outer scope).
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body.cond"),
         helper.make_node("Mul", ["acc_in", "decay"], ["acc_scaled"], name="body.mul"),
         helper.make_node("Add", ["acc_scaled", "step"], ["acc_out"], name="body.add"),
         helper.make_node("Identity", ["acc_out"], ["scan_out"], name="body.scan")],
        "loop_body",
        [vi("iter", TP.INT64, []), vi("cond_in", TP.BOOL, []), vi("acc_in", TP.FLOAT, [4])],
        [vi("cond_out", TP.BOOL, []), vi("acc_out", TP.FLOAT, [4]), vi("scan_out", TP.FLOAT, [4])])
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["scaled"], name="outer.scaled", doc_string="read only by the If"),
        helper.make_node("Sigmoid", ["x"], ["gate"], name="outer.gate"),
        helper.make_node("ReduceSum", ["x"], ["total"], name="outer.total", keepdims=0),
        helper.make_node("Tanh", ["x"], ["decay"], name="outer.decay"),
        helper.make_node("Abs", ["x"], ["step"], name="outer.step"),
        helper.make_node("If", ["cond"], ["branch"], name="outer.if", then_branch=then_g, else_branch=else_g),
        helper.make_node("Loop", ["trips", "", "x"], ["acc", "scan"], name="outer.loop", body=body),
        helper.make_node("ScaleShift", ["branch"], ["shifted"], name="outer.fn", domain="com.example.custom"),
        helper.make_node("ScaleShift", ["acc"], ["acc_neg"], name="outer.fn_neg", domain="com.example.custom"),
        helper.make_node("Add", ["shifted", "acc_neg"], ["y"], name="outer.add"),
    ]
    nodes[-2].overload = "negated"
    # Node metadata as the dynamo exporter writes it (IR 10, unknown to libonnx 1.12).
    for n in nodes:
        helper.set_metadata_props(n, {"namespace": f"test.{n.name}", "pkg.torch.onnx.fx_node": f"%{n.name}"})
    g = helper.make_graph(
        nodes, "preservation",
        [vi("x", TP.FLOAT, [4]), vi("cond", TP.BOOL, []), vi("trips", TP.INT64, [])],
        [vi("y", TP.FLOAT, [4]), vi("scan", TP.FLOAT, ["trips", 4])],
        initializer=[numpy_helper.from_array(np.array(2.0, np.float32), "two"),
                     numpy_helper.from_array(np.array(0.0, np.float32), "zero")],
        doc_string="graph doc string")
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example.custom", 1)],
                          functions=[fn, fn_neg], producer_name="exporter-under-test", producer_version="9.8.7",
                          domain="com.example", model_version=42, doc_string="model doc string")
    m.ir_version = 10
    helper.set_model_props(m, {"author": "fuseopt tests", "license": "none", "zz_last": "kept in order"})
    # Unknown fields on the model and on the graph, appended as raw protobuf.
    graph_bytes = m.graph.SerializeToString() + len_field(98, GRAPH_MARKER)
    m.ClearField("graph")
    return m.SerializeToString() + len_field(7, graph_bytes) + len_field(99, MODEL_MARKER)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    args = lib.parse_args()
    np, onnx, _ = lib.require("numpy", "onnx", "onnxruntime")
    from onnx import helper, numpy_helper, TensorProto as TP
    failures = []
    expect = lib.expecter(failures)

    rng = np.random.default_rng(3)
    feeds = [[x, np.array(c), np.array(t, np.int64)]
             for x in (rng.standard_normal(4).astype(np.float32), -np.abs(rng.standard_normal(4)).astype(np.float32))
             for c in (True, False) for t in (0, 1, 3)]

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.onnx")
        with open(src, "wb") as f:
            f.write(build(onnx, helper, TP, numpy_helper, np))
        onnx.checker.check_model(src, full_check=True)
        original = onnx.load(src)
        before = sha(src)
        want = [lib.run_ort(src, f) for f in feeds]

        def attr_bytes(model):
            return {(n.name, a.name): a.SerializeToString() for n in model.graph.node for a in n.attribute
                    if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)}

        for mode, flags in (("none", ["--passes", "none"]), ("all", [])):
            outs = []
            for run in ("a", "b"):
                out = os.path.join(tmp, f"out_{mode}_{run}.onnx")
                r = lib.run_fuseopt(args.bin, src, out, "-q", *flags)
                expect(r.returncode == 0, f"[{mode}] fuseopt run {run} exits 0 ({r.stderr.strip()})")
                outs.append(out)
            out = outs[0]
            if not all(os.path.exists(o) for o in outs):
                continue
            raw = open(out, "rb").read()
            expect(raw == open(outs[1], "rb").read(), f"[{mode}] two runs write identical bytes")
            expect(MODEL_MARKER in raw, f"[{mode}] the unknown ModelProto field is kept")
            expect(GRAPH_MARKER in raw, f"[{mode}] the unknown GraphProto field is kept")
            m = onnx.load(out)
            for field in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
                expect(getattr(m, field) == getattr(original, field),
                       f"[{mode}] model {field} kept ({getattr(m, field)!r})")
            expect([(p.key, p.value) for p in m.metadata_props] ==
                   [(p.key, p.value) for p in original.metadata_props], f"[{mode}] metadata_props kept in order")
            expect(m.graph.name == original.graph.name and m.graph.doc_string == original.graph.doc_string,
                   f"[{mode}] graph name and doc_string kept")
            docs = {n.name: n.doc_string for n in m.graph.node if n.doc_string}
            expect(docs.get("outer.scaled") == "read only by the If", f"[{mode}] node doc_string kept ({docs})")
            node_meta = {n.name: ([(p.key, p.value) for p in n.metadata_props], n.overload) for n in m.graph.node}
            want_meta = {n.name: ([(p.key, p.value) for p in n.metadata_props], n.overload)
                         for n in original.graph.node}
            lost = sorted(k for k in want_meta if k in node_meta and node_meta[k] != want_meta[k])
            expect(not lost and node_meta.get("outer.fn_neg", ([], ""))[1] == "negated",
                   f"[{mode}] node metadata_props and overload (IR-10 fields) kept (lost on {lost})")
            got_attrs, want_attrs = attr_bytes(m), attr_bytes(original)
            expect(got_attrs == want_attrs,
                   f"[{mode}] If/Loop subgraph attributes byte-identical ({sorted(got_attrs)} vs {sorted(want_attrs)})")
            names = {o for n in m.graph.node for o in n.output}
            expect({"scaled", "gate", "total", "decay", "step"} <= names,
                   f"[{mode}] outer values read only by subgraphs keep their producers and names")
            expect([f.SerializeToString() for f in m.functions] ==
                   [f.SerializeToString() for f in original.functions], f"[{mode}] model-local function kept")
            expect({(o.domain, o.version) for o in m.opset_import} >= {("com.example.custom", 1)},
                   f"[{mode}] custom-domain opset import kept")
            try:
                onnx.checker.check_model(out, full_check=True)
                checked = True
            except Exception as e:  # noqa: BLE001
                checked = False
                print(f"     checker: {str(e).splitlines()[0]}")
            expect(checked, f"[{mode}] onnx.checker (full_check) accepts the output")
            bad = []
            for f, w in zip(feeds, want):
                got = lib.run_ort(out, f)
                for i, (g_, w_) in enumerate(zip(got, w)):
                    p = lib.compare(np.asarray(g_), np.asarray(w_), 1e-6, 1e-6)
                    if p:
                        bad.append(f"cond={f[1]} trips={f[2]} output {i}: {p}")
            expect(not bad, f"[{mode}] ONNX Runtime gives the input's outputs on {len(feeds)} feeds {bad[:2]}")
        expect(sha(src) == before, "the input file is unchanged")
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
