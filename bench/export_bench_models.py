#!/usr/bin/env python3
"""Export full-size models for benchmarking (random weights, no network):
BERT-base (hidden 768, 12 layers, 12 heads) through the TorchScript exporter
at opset 17 with batch/seq dynamic. Runs on the GPU machine.

  python3 bench/export_bench_models.py --out /tmp/bench
"""
import argparse
import os

import torch
import transformers as tf


class Wrap(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      token_type_ids=token_type_ids).last_hidden_state


def bert_base(attn="eager"):
    torch.manual_seed(0)
    cfg = tf.BertConfig(attn_implementation=attn)  # bert-base-uncased sizes
    return Wrap(tf.BertModel(cfg, add_pooling_layer=False).eval())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/bench")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    m = bert_base()
    ids = torch.randint(0, 30000, (1, 128))
    ones = torch.ones(1, 128, dtype=torch.int64)
    zeros = torch.zeros(1, 128, dtype=torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dyn = {n: {0: "batch", 1: "seq"} for n in names}
    dyn["out"] = {0: "batch", 1: "seq"}
    path = os.path.join(a.out, "bert_base_op17_ts.onnx")
    with torch.no_grad():
        torch.onnx.export(m, (ids, ones, zeros), path, input_names=names, output_names=["out"],
                          opset_version=17, dynamic_axes=dyn, dynamo=False)
    print("exported", path, os.path.getsize(path) // (1 << 20), "MiB")


if __name__ == "__main__":
    main()
