"""Bad input never crashes fuseopt and never leaves anything behind: for each
case the exit code is non-zero, stderr is ONE line `fuseopt: error: ...` that
names the file/node, no output file (or temporary file) is left in the output
folder, and the input file is unchanged. Bad files are generated here with the
onnx package."""
import hashlib
import os
import shutil
import stat
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402


def sha(path):
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def small_model(onnx, helper, TensorProto, nodes=None, opset=17, initializers=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    if nodes is None:
        nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "g", [x], [y], initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def external_weight_model(onnx, helper, TensorProto, location):
    w = TensorProto()
    w.name = "w"
    w.data_type = TensorProto.FLOAT
    w.dims.extend([2, 3])
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "24")):
        e = w.external_data.add()
        e.key, e.value = k, v
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return small_model(onnx, helper, TensorProto, nodes, initializers=[w])


def main():
    args = lib.parse_args()
    onnx, = lib.require("onnx")
    from onnx import helper, TensorProto

    tmp = tempfile.mkdtemp(prefix="fuseopt_bad_")
    failures = []

    def case(name, in_path, out_path, must_mention, extra=()):
        out_dir = os.path.dirname(out_path) or "."
        listing_before = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else None
        in_hash = sha(in_path)
        out_hash_before = sha(out_path)
        r = lib.run_fuseopt(args.bin, in_path, out_path, *extra)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        problems = []
        if r.returncode == 0:
            problems.append("exit code 0")
        if r.returncode < 0:
            problems.append(f"crashed with signal {-r.returncode}")
        if len(lines) != 1 or not lines[0].startswith("fuseopt: error: "):
            problems.append(f"stderr is not one 'fuseopt: error:' line: {r.stderr!r}")
        for word in must_mention:
            if lines and word not in lines[0]:
                problems.append(f"message does not mention {word!r}: {lines[0]!r}")
        if out_path != in_path and sha(out_path) != out_hash_before:
            problems.append("an output file was written")
        if listing_before is not None and sorted(os.listdir(out_dir)) != listing_before:
            problems.append(f"output folder changed: {sorted(os.listdir(out_dir))} vs {listing_before}")
        if sha(in_path) != in_hash:
            problems.append("the input file was modified")
        status = "FAIL" if problems else "ok  "
        print(f"{status} {name}: {lines[0] if lines else '(no message)'}")
        for p in problems:
            failures.append(f"{name}: {p}")

    def write_model(name, model):
        d = os.path.join(tmp, name)
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, "model.onnx")
        with open(p, "wb") as f:
            f.write(model.SerializeToString())
        return p

    out_dir = os.path.join(tmp, "out")
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "out.onnx")

    good = write_model("good", small_model(onnx, helper, TensorProto))
    data = open(good, "rb").read()

    # Truncated model: the first 60% of a real serialized model.
    trunc = os.path.join(tmp, "truncated.onnx")
    with open(trunc, "wb") as f:
        f.write(data[: int(len(data) * 0.6)])
    case("truncated file", trunc, out, ["truncated.onnx"])

    text = os.path.join(tmp, "notes.onnx")
    with open(text, "w") as f:
        f.write("this is not an onnx model\n" * 20)
    case("non-ONNX file", text, out, ["notes.onnx"])

    empty = os.path.join(tmp, "empty.onnx")
    open(empty, "wb").close()
    case("empty file", empty, out, ["empty.onnx"])

    case("missing file", os.path.join(tmp, "no_such_model.onnx"), out, ["no_such_model.onnx", "no such file"])

    cycle = write_model("cycle", small_model(onnx, helper, TensorProto, [
        helper.make_node("Add", ["x", "b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
        helper.make_node("Identity", ["a"], ["y"], name="out"),
    ]))
    case("cycle", cycle, out, ["cycle", "model.onnx"])

    dangling = write_model("dangling", small_model(onnx, helper, TensorProto, [
        helper.make_node("Add", ["x", "ghost"], ["y"], name="adder"),
    ]))
    case("dangling node input", dangling, out, ["adder", "ghost"])

    arity = write_model("arity", small_model(onnx, helper, TensorProto, [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Gather", ["r"], ["y"], name="lonely_gather"),
    ]))
    case("node lacking a required input", arity, out, ["lonely_gather", "Gather"])

    too_new = write_model("too_new", small_model(onnx, helper, TensorProto, opset=99))
    case("opset too new", too_new, out, ["opset 99"])

    absolute = write_model("absolute", external_weight_model(onnx, helper, TensorProto, "/etc/passwd"))
    case("external data, absolute location", absolute, out, ["/etc/passwd"])

    escaping = write_model("escaping", external_weight_model(onnx, helper, TensorProto, "../secret.bin"))
    with open(os.path.join(tmp, "secret.bin"), "wb") as f:
        f.write(b"\0" * 24)
    case("external data, location escaping with ../", escaping, out, ["../secret.bin"])

    # Output path == input path (the good model must survive untouched).
    case("output path is the input", good, good, ["input"])
    alias = os.path.join(tmp, "good", ".", "model.onnx")
    case("output path is the input (spelled differently)", good, alias, ["input"])

    # The output's side file would be the input's own weight file: refused, and
    # the input's weights survive (its model still points into that file).
    shared_dir = os.path.join(tmp, "shared_side")
    os.makedirs(shared_dir)
    side_in = os.path.join(shared_dir, "in.onnx")
    with open(side_in, "wb") as f:
        f.write(external_weight_model(onnx, helper, TensorProto, "next.onnx.data").SerializeToString())
    with open(os.path.join(shared_dir, "next.onnx.data"), "wb") as f:
        f.write(bytes(range(24)))
    side_before = sha(os.path.join(shared_dir, "next.onnx.data"))
    case("output side file is the input's weight file", side_in, os.path.join(shared_dir, "next.onnx"),
         ["next.onnx.data", "weight file"], extra=["--external-data"])
    if sha(os.path.join(shared_dir, "next.onnx.data")) != side_before:
        failures.append("output side file is the input's weight file: the input's weights were overwritten")

    case("output folder does not exist", good, os.path.join(tmp, "nowhere", "out.onnx"), ["nowhere"])

    # Unwritable output folder: a read-only folder for a normal user; root
    # writes anywhere, so it gets sysfs, where no file can be created.
    if os.geteuid() != 0:
        ro = os.path.join(tmp, "readonly")
        os.makedirs(ro)
        os.chmod(ro, stat.S_IRUSR | stat.S_IXUSR)
        case("unwritable output folder", good, os.path.join(ro, "out.onnx"), ["readonly"])
        os.chmod(ro, stat.S_IRWXU)
    elif os.path.isdir("/sys"):
        case("unwritable output folder", good, "/sys/fuseopt_out.onnx", ["/sys"])
    else:
        print("skip unwritable output folder: running as root without /sys")

    case("unwritable report folder", good, out, ["nowhere"],
         extra=["--report", os.path.join(tmp, "nowhere", "r.json")])
    case("unknown pass name", good, out, ["NoSuchPass"], extra=["--passes", "NoSuchPass"])

    # The good model itself goes through (the harness is not just failing everything).
    r = lib.run_fuseopt(args.bin, good, out, "-q")
    if r.returncode != 0 or not os.path.exists(out):
        failures.append(f"good model: exit {r.returncode}: {r.stderr.strip()}")
    else:
        print("ok   good model is accepted")

    shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
