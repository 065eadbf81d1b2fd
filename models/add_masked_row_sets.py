#!/usr/bin/env python3
"""Adds test_data_set_masked to encoder model folders: the inputs of test_data_set_0
with one batch row whose attention_mask is all zeros (a fully padded sequence), and
ONNX Runtime CPU (fp32) reference outputs.

Why: Hugging Face encoders add (1 - mask) * finfo(float32).min to the scores, so a
fully masked row is a uniform softmax, finite in fp32. In fp16/bf16 that constant
overflows unless it is clamped, and the fused Attention op must give the same uniform
row (mask_filter_value). Every set in a folder is checked by `tools/gpu.sh models`
and by the CPU e2e checks, so this row is checked at every precision.

  python3 models/add_masked_row_sets.py models/exported/bert_op17_ts [more folders]
  python3 models/add_masked_row_sets.py --encoders     # the encoder folders in models/
"""
import argparse
import glob
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper as nh

ENCODER_FAMILIES = ("bert", "roberta", "distilbert", "albert", "electra", "mpnet", "mobilebert",
                    "deberta", "debertav2", "t5enc", "modernbert", "roformer")


def load_set(d):
    out = []
    for f in sorted(glob.glob(os.path.join(d, "input_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3])):
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        out.append((t.name, nh.to_array(t)))
    return out


def add_set(folder):
    src = os.path.join(folder, "test_data_set_0")
    inputs = load_set(src)
    names = [n for n, _ in inputs]
    if "attention_mask" not in names:
        return f"skip {folder}: no attention_mask input"
    arrays = dict(inputs)
    b = arrays["attention_mask"].shape[0]
    if b < 2:  # a second row to mask; the first stays as it was
        arrays = {n: np.concatenate([a, a], axis=0) for n, a in arrays.items()}
    mask = arrays["attention_mask"].copy()
    mask[-1, :] = 0
    arrays["attention_mask"] = mask
    sess = ort.InferenceSession(os.path.join(folder, "model.onnx"), providers=["CPUExecutionProvider"])
    feed = {i.name: arrays[i.name] for i in sess.get_inputs()}
    outs = sess.run(None, feed)
    for o, v in zip(sess.get_outputs(), outs):
        if np.issubdtype(v.dtype, np.floating) and not np.all(np.isfinite(v)):
            return f"skip {folder}: output {o.name} is not finite for a fully masked row (not the HF finfo.min form)"
    dst = os.path.join(folder, "test_data_set_masked")
    os.makedirs(dst, exist_ok=True)
    for i, n in enumerate(names):
        with open(os.path.join(dst, f"input_{i}.pb"), "wb") as fh:
            fh.write(nh.from_array(arrays[n], n).SerializeToString())
    for i, (o, v) in enumerate(zip(sess.get_outputs(), outs)):
        with open(os.path.join(dst, f"output_{i}.pb"), "wb") as fh:
            fh.write(nh.from_array(v, o.name).SerializeToString())
    return f"wrote {dst} (batch {arrays['attention_mask'].shape[0]}, last row fully masked)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="*")
    ap.add_argument("--encoders", action="store_true", help="every encoder folder under models/")
    a = ap.parse_args()
    folders = list(a.folders)
    if a.encoders:
        root = os.path.dirname(os.path.abspath(__file__))
        for d in sorted(glob.glob(os.path.join(root, "*", "*"))):
            fam = os.path.basename(d).split("_")[0]
            # Not the fp16 synthetic block: in an fp16 model the mask constant is fp16's lowest
            # value, and whether s + (-65504) rounds back to -65504 (strict fp16 Add: a uniform
            # row) or keeps s (ORT's optimized CPU graph: softmax(s)) is implementation-defined.
            if (fam in ENCODER_FAMILIES and os.path.isfile(os.path.join(d, "model.onnx")) and "incoming" not in d
                    and "synthetic" not in d):
                folders.append(d)
    if not folders:
        sys.exit("add_masked_row_sets: no folders (give folders or --encoders)")
    for f in folders:
        print(add_set(f))


if __name__ == "__main__":
    main()
