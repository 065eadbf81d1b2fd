#!/usr/bin/env python3
"""PyTorch anchors measured in the same run as fuseopt's figures: BERT-base
fp16, eager (SDPA) and torch.compile (reduce-overhead = CUDA graphs), timed
with triton.testing.do_bench (median), as in ../shared/ANCHORS.md.

  python3 bench/torch_baseline.py --shapes 1x128,32x128 [--json FILE]
"""
import argparse
import json

import torch
import transformers as tf
from triton.testing import do_bench


class Wrap(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      token_type_ids=token_type_ids).last_hidden_state


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1x128,32x128")
    ap.add_argument("--modes", default="eager,reduce-overhead")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.manual_seed(0)
    cfg = tf.BertConfig(attn_implementation="sdpa")
    model = Wrap(tf.BertModel(cfg, add_pooling_layer=False)).eval().cuda().half()
    results = []
    for shape in a.shapes.split(","):
        b, s = (int(x) for x in shape.split("x"))
        ids = torch.randint(0, 30000, (b, s), device="cuda")
        ones = torch.ones(b, s, dtype=torch.int64, device="cuda")
        zeros = torch.zeros(b, s, dtype=torch.int64, device="cuda")
        for mode in a.modes.split(","):
            fn = model if mode == "eager" else torch.compile(model, mode=mode)
            with torch.no_grad():
                for _ in range(3):
                    fn(ids, ones, zeros)
                torch.cuda.synchronize()
                ms = do_bench(lambda: fn(ids, ones, zeros), warmup=50, rep=300)
            results.append({"model": "bert-base", "shape": shape, "mode": mode, "ms": ms})
            print(f"torch {mode:16s} bert-base {shape:7s} {ms:.3f} ms", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
