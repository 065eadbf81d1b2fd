"""Robustness: corrupted models never crash fuseopt. Seeded mutations of real
models (byte flips; rewired, dropped or extra node inputs, odd attribute
values, other op types, odd initializer dims) must give exit 0, or exit 1 with
ONE `fuseopt: error:` line: never a signal, never a second line."""
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

MODELS = ["models/real/bert_eager_op17_ts", "models/real/gpt2_op17_ts", "models/real/resnet_tiny_op17_ts",
          "models/exported/llama_op17_ts", "models/real/vit_op18_dynamo"]
PER_MODEL = 30


def mutate_structure(onnx, base, rng):
    m = onnx.ModelProto()
    m.CopyFrom(base)
    g = m.graph
    names = [x.name for x in g.input] + [x.name for x in g.initializer] + [o for n in g.node for o in n.output]
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(6)
        node = g.node[rng.randrange(len(g.node))]
        if kind == 0 and len(node.input):
            node.input[rng.randrange(len(node.input))] = rng.choice(names)  # may create cycles
        elif kind == 1 and len(node.input):
            del node.input[rng.randrange(len(node.input))]
        elif kind == 2 and len(node.attribute):
            a = node.attribute[rng.randrange(len(node.attribute))]
            if a.type == onnx.AttributeProto.INT:
                a.i = rng.choice([-5, -1, 0, 1, 2, 7, 1 << 40])
            elif a.type == onnx.AttributeProto.INTS and len(a.ints):
                a.ints[rng.randrange(len(a.ints))] = rng.choice([-9, -1, 0, 3, 99])
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice([0.0, -1.0, float("nan"), 1e30])
        elif kind == 3:
            node.op_type = rng.choice(["Add", "Mul", "Relu", "Reshape", "MatMul", "Softmax", "LayerNormalization",
                                       "Gather", "Transpose", "Concat", "Split", "Where", "NoSuchOp"])
        elif kind == 4 and len(g.initializer):
            t = g.initializer[rng.randrange(len(g.initializer))]
            if len(t.dims):
                t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, 3])
        elif kind == 5:
            node.input.append(rng.choice(names))
    return m.SerializeToString()


def flip_bytes(data, rng):
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def main():
    args = lib.parse_args()
    onnx, = lib.require("onnx")
    exe = os.path.join(args.bin, "fuseopt")
    failures = []
    runs = 0
    with tempfile.TemporaryDirectory() as tmp:
        for rel in MODELS:
            src = os.path.join(args.src, rel, "model.onnx")
            if not os.path.exists(src):
                continue
            base = onnx.load(src)
            raw = open(src, "rb").read()
            rng = random.Random(len(rel) * 7919)  # fixed seed per model: reproducible
            for i in range(PER_MODEL):
                data = mutate_structure(onnx, base, rng) if i % 3 else flip_bytes(raw, rng)
                path = os.path.join(tmp, f"m{i}.onnx")
                with open(path, "wb") as f:
                    f.write(data)
                r = subprocess.run([exe, path, os.path.join(tmp, "out.onnx"), "-q"], capture_output=True, timeout=300)
                runs += 1
                err = r.stderr.decode("utf-8", errors="replace").strip().splitlines()
                ok = r.returncode == 0 or (r.returncode == 1 and len(err) == 1 and err[0].startswith("fuseopt: error:"))
                if not ok:
                    keep = os.path.join(tempfile.gettempdir(), f"fuseopt_fuzz_{os.path.basename(rel)}_{i}.onnx")
                    with open(keep, "wb") as f:
                        f.write(data)
                    failures.append(f"{rel} mutation {i}: exit {r.returncode}, stderr {err[-2:]} (kept as {keep})")
    for f in failures:
        print("FAIL " + f)
    print(f"{runs} corrupted models, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
