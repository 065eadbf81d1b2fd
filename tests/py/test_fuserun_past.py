#!/usr/bin/env python3
"""fuserun --past N on a KV-cache decoder: the cache inputs get N positions,
the new tokens default to one decode step, the attention mask covers both,
and every present output comes back with N + new positions.

The model is built here with the onnx package (skipped without it): a toy
decoder step whose present = Concat(past, new) on the sequence axis, the
form HF decoders export, with symbolic dims named as the exporters name them.
Invoked by ctest as: test_fuserun_past.py --bin <build>/bin --src <repo>.
"""
import json
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from _fuseopt_testlib import parse_args, require  # noqa: E402


def toy_decoder(onnx, helper, TP):
    H, D = 2, 8
    x = helper.make_tensor_value_info("input_ids", TP.INT64, ["batch", "seq"])
    m = helper.make_tensor_value_info("attention_mask", TP.INT64, ["batch", "total"])
    pk = helper.make_tensor_value_info("past_key_values.0.key", TP.FLOAT, ["batch", H, "past", D])
    pv = helper.make_tensor_value_info("past_key_values.0.value", TP.FLOAT, ["batch", H, "past", D])
    outs = [helper.make_tensor_value_info(n, TP.FLOAT, ["batch", H, "total", D])
            for n in ("present.0.key", "present.0.value")]
    mask_sum = helper.make_tensor_value_info("mask_sum", TP.INT64, ["batch"])
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["ids_f"], to=TP.FLOAT),
        helper.make_node("Unsqueeze", ["ids_f", "axes13"], ["ids_4d"]),           # [b, 1, s, 1]
        helper.make_node("Shape", ["input_ids"], ["ids_shape"]),
        helper.make_node("Slice", ["ids_shape", "zero", "one"], ["ids_b"]),
        helper.make_node("Slice", ["ids_shape", "one", "two"], ["ids_s"]),
        helper.make_node("Concat", ["ids_b", "hd_h", "ids_s", "hd_d"], ["new_shape"], axis=0),
        helper.make_node("Expand", ["ids_4d", "new_shape"], ["new_kv"]),          # [b, H, s, D]
        helper.make_node("Concat", ["past_key_values.0.key", "new_kv"], ["present.0.key"], axis=2),
        helper.make_node("Concat", ["past_key_values.0.value", "new_kv"], ["present.0.value"], axis=2),
        helper.make_node("ReduceSum", ["attention_mask", "one"], ["mask_sum"], keepdims=0),
    ]
    inits = [helper.make_tensor("axes13", TP.INT64, [2], [1, 3]), helper.make_tensor("zero", TP.INT64, [1], [0]),
             helper.make_tensor("one", TP.INT64, [1], [1]), helper.make_tensor("two", TP.INT64, [1], [2]),
             helper.make_tensor("hd_h", TP.INT64, [1], [H]), helper.make_tensor("hd_d", TP.INT64, [1], [D])]
    g = helper.make_graph(nodes, "toy_decoder", [x, m, pk, pv], outs + [mask_sum], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def main():
    a = parse_args()
    onnx, = require("onnx")
    from onnx import TensorProto as TP, helper
    fuserun = pathlib.Path(a.bin) / "fuserun"
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "decoder.onnx"
        onnx.save(toy_decoder(onnx, helper, TP), path)

        def run(*args):
            js = pathlib.Path(tmp) / "run.json"
            r = subprocess.run([str(fuserun), str(path), "--backend", "cpu", "--iters", "1", "--warmup", "0",
                                "--json", str(js), "-q", *args], capture_output=True, text=True, timeout=120)
            return r, (json.loads(js.read_text()) if r.returncode == 0 and js.exists() else None)

        def shapes(js, key):  # "inputs" is keyed by name, "outputs" a list
            if isinstance(js[key], dict):
                return {n: o["shape"] for n, o in js[key].items()}
            return {o["name"]: o["shape"] for o in js[key]}

        r, js = run("--past", "5")
        if js is None:
            print("FAIL --past 5:", r.stderr.strip())
            return 1
        ins, outs = shapes(js, "inputs"), shapes(js, "outputs")
        checks = [
            ("past key has 5 positions", ins["past_key_values.0.key"] == [1, 2, 5, 8]),
            ("one new token by default", ins["input_ids"] == [1, 1]),
            ("mask covers past + new", ins["attention_mask"] == [1, 6]),
            ("present key has 6 positions", outs["present.0.key"] == [1, 2, 6, 8]),
            ("present value has 6 positions", outs["present.0.value"] == [1, 2, 6, 8]),
        ]
        r, js = run("--past", "7", "--shape", "batch=3", "--shape", "seq=4")
        if js is None:
            print("FAIL --past 7 with batch/seq:", r.stderr.strip())
            return 1
        ins, outs = shapes(js, "inputs"), shapes(js, "outputs")
        checks += [
            ("batch 3, 4 new tokens", ins["input_ids"] == [3, 4]),
            ("mask 7 + 4", ins["attention_mask"] == [3, 11]),
            ("present 11 positions", outs["present.0.key"] == [3, 2, 11, 8]),
        ]
        r, _ = run("--past", "3", "--shape", "past=4")
        checks.append(("--past against a conflicting --shape is one error",
                       r.returncode != 0 and "--past 3" in r.stderr and len(r.stderr.strip().splitlines()) == 1))
        for name, good in checks:
            print(("ok   " if good else "FAIL ") + name)
            ok = ok and good
        if not ok:
            print("inputs", ins, "outputs", outs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
