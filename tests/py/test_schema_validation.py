#!/usr/bin/env python3
"""Schema validation on load (src/onnx_io/validate_model.h), against the onnx package.

1. Signatures: for every op of ai.onnx (opsets 1..28) and ai.onnx.ml (1..5), the signature
   fuseopt checks a node against (libonnx 1.12's registry plus our table of the later
   versions) has the onnx package's input/output counts and options, attributes (name,
   type, required) and deprecation; ops that accept undeclared attributes are the ones the
   onnx checker lets an unknown attribute through on.
2. No false rejections: every model in models/ (and /work/shared/models) validates and
   optimizes; its output (and the --emit standard output of 12 opset-18 exports) validates
   when read back; for every 4th model the output is byte-identical with --no-validate.
3. The CLIs: a schema-invalid model is refused with one line naming file, node and op, and
   nothing is written; --no-validate lets it through (fuseopt and fuserun); fuserun on an
   input of 2^40 elements names the input and the bytes.
4. Python: optimize(..., validate=) and InferenceSession(..., validate=).
Invoked by ctest as: test_schema_validation.py --bin <build>/bin --src <repo>.
"""
import concurrent.futures
import glob
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fuseopt_testlib import SKIP, parse_args, require  # noqa: E402

np, onnx = require("numpy", "onnx")
from onnx import TensorProto, checker, helper  # noqa: E402

MAX_OPSET = {"": 28, "ai.onnx.ml": 5}
# Deprecated by ONNX after release, still run by ONNX Runtime: fuseopt warns instead of refusing.
STILL_RUN = {("", "GroupNormalization", 18)}
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL:", msg)


def load_module(bin_dir):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "python"))
    try:
        import fuseopt  # noqa: F401
        from fuseopt import _fuseopt
        return fuseopt, _fuseopt
    except ImportError as e:
        print(f"SKIP: the fuseopt Python module is not built ({e})")
        sys.exit(SKIP)


# ---- 1. signatures -------------------------------------------------------------------------

def option_name(o):
    return str(o).split(".")[-1].lower()


def onnx_facts(s):
    return dict(
        min_inputs=s.min_input, max_inputs=s.max_input,
        min_outputs=s.min_output, max_outputs=s.max_output,
        inputs=[(f.name, option_name(f.option), f.min_arity if option_name(f.option) == "variadic" else 1)
                for f in s.inputs],
        outputs=[(f.name, option_name(f.option), f.min_arity if option_name(f.option) == "variadic" else 1)
                 for f in s.outputs],
        attributes={n: (str(a.type).split(".")[-1], bool(a.required)) for n, a in s.attributes.items()},
        deprecated=bool(s.deprecated))


def our_facts(sig):
    return dict(
        min_inputs=sig["min_inputs"], max_inputs=sig["max_inputs"],
        min_outputs=sig["min_outputs"], max_outputs=sig["max_outputs"],
        inputs=[tuple(f) for f in sig["inputs"]], outputs=[tuple(f) for f in sig["outputs"]],
        attributes={n: tuple(a) for n, a in sig["attributes"].items()}, deprecated=sig["deprecated"])


def check_signatures(_fuseopt):
    compared = 0
    for domain, top in MAX_OPSET.items():
        names = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == domain}
        names |= set(_fuseopt._op_names(domain))
        for op in sorted(names):
            for opset in range(1, top + 1):
                try:
                    ref = onnx.defs.get_schema(op, opset, domain)
                except onnx.defs.SchemaError:
                    ref = None
                ours = _fuseopt._op_signature(domain, op, opset)
                where = f"{domain or 'ai.onnx'} {op} at opset {opset}"
                if ref is None or ours is None:
                    if (ref is None) != (ours is None):
                        fail(f"{where}: onnx has {'no' if ref is None else 'a'} schema, fuseopt "
                             f"{'none' if ours is None else 'one'}")
                    continue
                want, got = onnx_facts(ref), our_facts(ours)
                if (domain, op, ref.since_version) in STILL_RUN:
                    if not (want["deprecated"] and not got["deprecated"] and ours["deprecation_warning"]):
                        fail(f"{where}: expected onnx deprecated, fuseopt a warning")
                    want["deprecated"] = got["deprecated"]
                for k in want:
                    if want[k] != got[k]:
                        fail(f"{where}: {k}: onnx {want[k]} vs fuseopt {got[k]}")
                compared += 1
    print(f"signatures: {compared} (op, opset) pairs compared with onnx {onnx.__version__}")


def placeholder_attribute(name, t):
    A = onnx.AttributeProto
    kind = str(t).split(".")[-1]
    values = {"INT": 1, "FLOAT": 1.0, "STRING": "a", "INTS": [1], "FLOATS": [1.0], "STRINGS": ["a"],
              "TENSOR": helper.make_tensor("t", TensorProto.FLOAT, [1], [1.0])}
    if kind == "GRAPH":
        return helper.make_attribute(name, helper.make_graph([], name, [], []))
    if kind not in values:
        return None
    return helper.make_attribute(name, values[kind], attr_type=getattr(A, kind))


def check_unknown_attributes(_fuseopt):
    """An unknown attribute: refused by fuseopt exactly where the onnx checker refuses it."""
    compared = 0
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain not in MAX_OPSET or s.since_version > MAX_OPSET[s.domain] or s.deprecated:
            continue
        attrs = [placeholder_attribute(n, a.type) for n, a in s.attributes.items() if a.required]
        if any(a is None for a in attrs):
            continue
        node = helper.make_node(s.name, [f"i{k}" for k in range(s.min_input)], [f"o{k}" for k in range(max(1, s.min_output))],
                                domain=s.domain)
        node.attribute.extend(attrs)
        ctx = checker.C.CheckerContext()
        ctx.ir_version = 10
        ctx.opset_imports = {s.domain: s.since_version}
        try:
            checker.check_node(node, ctx)
        except Exception:
            continue  # the placeholder node itself is not one the checker takes
        node.attribute.extend([helper.make_attribute("zzz_unknown", 1)])
        try:
            checker.check_node(node, ctx)
            onnx_takes_any = True
        except Exception:
            onnx_takes_any = False
        ours = _fuseopt._op_signature(s.domain, s.name, s.since_version)
        if ours is not None and ours["any_attributes"] != onnx_takes_any:
            fail(f"{s.domain or 'ai.onnx'} {s.name}-{s.since_version}: the onnx checker "
                 f"{'takes' if onnx_takes_any else 'refuses'} an unknown attribute, fuseopt "
                 f"{'takes' if ours['any_attributes'] else 'refuses'} it")
        compared += 1
    print(f"unknown attributes: {compared} op versions compared with the onnx checker")


# ---- 2. no false rejections -------------------------------------------------------------------

def all_models(src):
    found = sorted(glob.glob(os.path.join(src, "models", "**", "*.onnx"), recursive=True))
    if os.path.isdir("/work/shared/models"):
        found += sorted(glob.glob("/work/shared/models/**/*.onnx", recursive=True))
    return found


def read(path):
    with open(path, "rb") as f:
        return f.read()


def fuseopt_both_ways(bin_dir, model, out_dir, compare):
    """(rc, rc_no_validate, same bytes, stderr, output) for one model; the --no-validate run
    only when `compare`."""
    # The same file name in two folders: an external-data side file is named after it.
    name = model.replace("/", "_").strip("_")
    a, b = os.path.join(out_dir, "v", name), os.path.join(out_dir, "nv", name)
    os.makedirs(os.path.dirname(a), exist_ok=True)
    os.makedirs(os.path.dirname(b), exist_ok=True)
    exe = os.path.join(bin_dir, "fuseopt")
    ra = subprocess.run([exe, "-q", model, a], capture_output=True, text=True, timeout=600)
    if not compare:
        return ra.returncode, 0, True, ra.stderr.strip(), a
    rb = subprocess.run([exe, "-q", "--no-validate", model, b], capture_output=True, text=True, timeout=600)
    same = ra.returncode == 0 and rb.returncode == 0 and read(a) == read(b)
    if os.path.exists(a + ".data") or os.path.exists(b + ".data"):
        same = same and os.path.exists(a + ".data") and os.path.exists(b + ".data") and read(a + ".data") == read(b + ".data")
    return ra.returncode, rb.returncode, same, ra.stderr.strip(), a


def check_models(bin_dir, src, _fuseopt, tmp):
    models = all_models(src)
    for m in models:
        try:
            _fuseopt._validate_model(read(m), m)
        except Exception as e:  # noqa: BLE001
            fail(f"false rejection of a real model: {e}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        # Every model optimized (its output read back below); every 4th also with --no-validate,
        # byte for byte (the validation only reads the proto, so a sample shows it changes nothing).
        results = list(pool.map(lambda im: (im[1], fuseopt_both_ways(bin_dir, im[1], tmp, im[0] % 4 == 0)),
                                enumerate(models)))
    for m, (rc, rc_nv, same, err, out) in results:
        if rc != 0 or rc_nv != 0:
            fail(f"{m}: fuseopt exit {rc} (--no-validate {rc_nv}): {err}")
        elif not same:
            fail(f"{m}: the output differs with --no-validate")
        else:
            try:
                _fuseopt._validate_model(read(out), out)  # fuseopt's own output reads back
            except Exception as e:  # noqa: BLE001
                fail(f"optimized {m} does not validate: {e}")
    standard = [m for m in models if "op18" in m][:12]
    exe = os.path.join(bin_dir, "fuseopt")
    for m in standard:
        out = os.path.join(tmp, "std_" + m.replace("/", "_").strip("_"))
        r = subprocess.run([exe, "-q", "--emit", "standard", m, out], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            continue  # a model with no standard form is refused by --emit standard itself
        try:
            _fuseopt._validate_model(read(out), out)
        except Exception as e:  # noqa: BLE001
            fail(f"--emit standard output of {m} does not validate: {e}")
    print(f"models: {len(models)} validated and optimized, outputs read back ({(len(models) + 3) // 4} also with "
          f"--no-validate, byte-identical); --emit standard on {len(standard)}")


# ---- 3. CLIs ------------------------------------------------------------------------------

def one_node_model(path, node, opset=13, inputs=("x",)):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(i, TensorProto.FLOAT, [2, 3]) for i in inputs],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def check_clis(bin_dir, tmp):
    fuseopt, fuserun = os.path.join(bin_dir, "fuseopt"), os.path.join(bin_dir, "fuserun")
    softmax = one_node_model(os.path.join(tmp, "softmax2.onnx"), helper.make_node("Softmax", ["x", "x"], ["y"], name="Softmax_3"))
    out = os.path.join(tmp, "out.onnx")
    r = subprocess.run([fuseopt, softmax, out], capture_output=True, text=True)
    want = f"fuseopt: error: {softmax}: node 'Softmax_3' (Softmax, opset 13): 2 inputs, the schema allows 1"
    if r.returncode == 0 or r.stderr.strip() != want or os.path.exists(out):
        fail(f"fuseopt on Softmax with two inputs: exit {r.returncode}, stderr {r.stderr!r}, wrote {os.path.exists(out)}")
    r = subprocess.run([fuserun, "--backend", "cpu", softmax], capture_output=True, text=True)
    if r.returncode != 2 or r.stderr.strip() != want.replace("fuseopt: error", "fuserun: error"):
        fail(f"fuserun on Softmax with two inputs: exit {r.returncode}, stderr {r.stderr!r}")
    # A model fuseopt can still handle though invalid: --no-validate takes it, with validation it is refused.
    mm = one_node_model(os.path.join(tmp, "matmul_axis.onnx"),
                        helper.make_node("MatMul", ["x", "w"], ["y"], name="mm", axis=1), inputs=("x",))
    m = onnx.load(mm)
    m.graph.initializer.append(onnx.numpy_helper.from_array(np.ones((3, 3), np.float32), "w"))
    onnx.save(m, mm)
    r = subprocess.run([fuseopt, "-q", mm, out], capture_output=True, text=True)
    if r.returncode == 0 or "node 'mm' (MatMul, opset 13): attribute 'axis' is not one of MatMul's" not in r.stderr:
        fail(f"fuseopt on MatMul with axis: exit {r.returncode}, stderr {r.stderr!r}")
    r = subprocess.run([fuseopt, "-q", "--no-validate", mm, out], capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out):
        fail(f"fuseopt --no-validate on MatMul with axis: exit {r.returncode}, stderr {r.stderr!r}")
    r = subprocess.run([fuserun, "--backend", "cpu", "--no-validate", "-q", mm], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"fuserun --no-validate on MatMul with axis: exit {r.returncode}, stderr {r.stderr!r}")
    r = subprocess.run([fuserun, "--backend", "cpu", "-q", mm], capture_output=True, text=True)
    if r.returncode != 2 or len(r.stderr.strip().splitlines()) != 1 or "'mm'" not in r.stderr:
        fail(f"fuserun on MatMul with axis: exit {r.returncode}, stderr {r.stderr!r}")
    # Resource errors: which input, how many bytes.
    relu = one_node_model(os.path.join(tmp, "relu.onnx"), helper.make_node("Relu", ["x"], ["y"], name="relu"))
    m = onnx.load(relu)
    for vi in (m.graph.input[0], m.graph.output[0]):
        del vi.type.tensor_type.shape.dim[:]
        vi.type.tensor_type.shape.dim.add().dim_param = "n"
    onnx.save(m, relu)
    r = subprocess.run([fuserun, "--backend", "cpu", "-q", relu, "--shape", f"n={1 << 40}"],
                       capture_output=True, text=True, timeout=60)
    want = "fuserun: error: input 'x' [1099511627776] float32: 4 TiB (4398046511104 bytes)"
    if r.returncode != 2 or not r.stderr.startswith(want) or len(r.stderr.strip().splitlines()) != 1:
        fail(f"fuserun on an input of ~2^40 elements: exit {r.returncode}, stderr {r.stderr!r}")
    print("CLIs: refusals, --no-validate, resource errors checked")
    return softmax, mm


# ---- 4. Python ----------------------------------------------------------------------------

def check_python(fuseopt, softmax, mm):
    try:
        fuseopt.optimize(softmax)
        fail("optimize() took a Softmax with two inputs")
    except fuseopt.Error as e:
        if "node 'Softmax_3' (Softmax, opset 13): 2 inputs, the schema allows 1" not in str(e):
            fail(f"optimize(): unexpected message {e}")
    model, _ = fuseopt.optimize(mm, validate=False)
    if [n.op_type for n in model.graph.node] != ["MatMul"]:
        fail("optimize(validate=False) did not pass the MatMul through")
    try:
        fuseopt.InferenceSession(onnx.load(mm), backend="cpu")
        fail("InferenceSession took a MatMul with an axis attribute")
    except fuseopt.Error as e:
        if "attribute 'axis'" not in str(e):
            fail(f"InferenceSession: unexpected message {e}")
    sess = fuseopt.InferenceSession(mm, backend="cpu", validate=False)
    (y,) = sess.run(None, {"x": np.ones((2, 3), np.float32)})
    if not np.allclose(y, 3.0):
        fail("InferenceSession(validate=False) computed the wrong numbers")
    print("Python: optimize(validate=...) and InferenceSession(validate=...) checked")


def main():
    args = parse_args()
    fuseopt, _fuseopt = load_module(args.bin)
    check_signatures(_fuseopt)
    check_unknown_attributes(_fuseopt)
    with tempfile.TemporaryDirectory(prefix="fuseopt-validate-") as tmp:
        check_models(args.bin, args.src, _fuseopt, tmp)
        softmax, mm = check_clis(args.bin, tmp)
        check_python(fuseopt, softmax, mm)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
