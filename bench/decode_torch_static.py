#!/usr/bin/env python3
"""The PyTorch side of the decode benchmark (bench/decode_bench.py), written out:
one decoder step of the same Llama-shaped model (same weights: decode_bench.build)
with a static KV cache held in module buffers, compiled with
torch.compile(mode="reduce-overhead", fullgraph=True) -- the form fast PyTorch
decoders take. transformers' own StaticCache path under torch.compile segfaulted
in three GPU calls (sessions 4-7), so the anchor no longer depends on it.

The step reads the cache as transformers' StaticCache does: attention spans the
whole cache of max_len positions with the positions after the current one masked
(one compile per batch size serves every cached length).

  python3 bench/decode_torch_static.py --validate      # CPU, fp32: step == transformers' model
  python3 bench/decode_torch_static.py --batch 1 --past 128,2048   # GPU timing, ms per token
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_bench as db  # noqa: E402


def make_step(torch, hf_model, batch, max_len, device, dtype):
    nn, F = torch.nn, torch.nn.functional
    cfg = hf_model.config
    H, KV, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    eps = cfg.rms_norm_eps
    sd = {k: v.detach().to(device=device, dtype=dtype) for k, v in hf_model.state_dict().items()}
    rp = getattr(cfg, "rope_parameters", None) or {}  # transformers 5 keeps rope_theta there
    theta = rp.get("rope_theta") if isinstance(rp, dict) and rp.get("rope_theta") else cfg.rope_theta
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    ang = torch.outer(torch.arange(max_len, dtype=torch.float32), inv)
    ang = torch.cat([ang, ang], dim=-1)

    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cos", ang.cos().to(device=device, dtype=dtype))
            self.register_buffer("sin", ang.sin().to(device=device, dtype=dtype))
            self.register_buffer("emb", sd["embed_tokens.weight"])
            self.register_buffer("norm", sd["norm.weight"])
            self.w = []
            for i in range(cfg.num_hidden_layers):
                p = f"layers.{i}."
                qkv = torch.cat([sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"],
                                 sd[p + "self_attn.v_proj.weight"]], 0)
                gu = torch.cat([sd[p + "mlp.gate_proj.weight"], sd[p + "mlp.up_proj.weight"]], 0)
                names = {"ln1": sd[p + "input_layernorm.weight"], "qkv": qkv, "o": sd[p + "self_attn.o_proj.weight"],
                         "ln2": sd[p + "post_attention_layernorm.weight"], "gu": gu,
                         "down": sd[p + "mlp.down_proj.weight"]}
                for k, v in names.items():
                    self.register_buffer(f"l{i}_{k}", v)
                self.register_buffer(f"l{i}_kc", torch.zeros(batch, KV, max_len, D, device=device, dtype=dtype))
                self.register_buffer(f"l{i}_vc", torch.zeros(batch, KV, max_len, D, device=device, dtype=dtype))
                self.w.append(i)

        def rms(self, x, w):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w

        def rope(self, x, cos, sin):
            x1, x2 = x[..., : D // 2], x[..., D // 2:]
            return x * cos + torch.cat([-x2, x1], dim=-1) * sin

        def forward(self, ids, pos):
            # ids [B, 1], pos [1] (int64): the new token's position = tokens already cached.
            h = F.embedding(ids, self.emb)
            cos, sin = self.cos[pos].view(1, 1, 1, D), self.sin[pos].view(1, 1, 1, D)
            keys = torch.arange(max_len, device=ids.device)
            mask = (keys <= pos).view(1, 1, 1, max_len)
            B = ids.shape[0]
            for i in self.w:
                g = lambda k: getattr(self, f"l{i}_{k}")  # noqa: E731
                x = self.rms(h, g("ln1"))
                qkv = F.linear(x, g("qkv"))
                q, k, v = qkv.split([H * D, KV * D, KV * D], dim=-1)
                q = self.rope(q.view(B, 1, H, D).transpose(1, 2), cos, sin)
                k = self.rope(k.view(B, 1, KV, D).transpose(1, 2), cos, sin)
                v = v.view(B, 1, KV, D).transpose(1, 2)
                kc, vc = g("kc"), g("vc")
                kc.index_copy_(2, pos, k)
                vc.index_copy_(2, pos, v)
                a = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask, enable_gqa=True)
                h = h + F.linear(a.transpose(1, 2).reshape(B, 1, H * D), g("o"))
                x = self.rms(h, g("ln2"))
                gate, up = F.linear(x, g("gu")).chunk(2, dim=-1)
                h = h + F.linear(F.silu(gate) * up, g("down"))
            return self.rms(h, self.norm)

        def fill(self, past):
            # past: [k0, v0, k1, v1, ...] each [B, KV, P, D]
            for i in self.w:
                P = past[2 * i].shape[2]
                getattr(self, f"l{i}_kc")[:, :, :P] = past[2 * i]
                getattr(self, f"l{i}_vc")[:, :, :P] = past[2 * i + 1]

    return Step().eval()


def validate(torch, tf):
    """CPU fp32, batch 2, 5 cached tokens: the written-out step against transformers."""
    torch.manual_seed(1)
    model = db.build(torch, tf).float()
    B, P = 2, 5
    ids = torch.randint(1, 128000, (B, 1))
    past = [torch.randn(B, db.KV_HEADS, P, db.HEAD_DIM) for _ in range(2 * db.LAYERS)]
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=torch.ones(B, P + 1, dtype=torch.int64),
                    past_key_values=db.cache_from(tf, [t.clone() for t in past]), use_cache=True).last_hidden_state
        step = make_step(torch, model, B, P + 16, "cpu", torch.float32)
        step.fill(past)
        got = step(ids, torch.tensor([P]))
    err = (got - ref).abs().max().item() / ref.abs().max().item()
    print(f"decode_torch_static --validate: max relative error {err:.2e} against transformers' LlamaModel")
    if not err < 1e-4:
        sys.exit("decode_torch_static: the written-out step does not match transformers")


def times(torch, tf, batch, pasts):
    from triton.testing import do_bench
    model = db.build(torch, tf)
    max_len = max(pasts) + 16
    step = make_step(torch, model, batch, max_len, "cuda", torch.half)
    del model
    fn = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    ids = torch.randint(1, 128000, (batch, 1), device="cuda")
    res = {}
    for p in pasts:
        step.fill([torch.randn(batch, db.KV_HEADS, p, db.HEAD_DIM, device="cuda", dtype=torch.half)
                   for _ in range(2 * db.LAYERS)])
        pos = torch.tensor([p], device="cuda")
        with torch.no_grad():
            for _ in range(3):
                fn(ids, pos)
            torch.cuda.synchronize()
            ms = do_bench(lambda: fn(ids, pos), warmup=25, rep=200)
        res[p] = ms
        print(f"torch.compile static cache (buffers, {max_len}) batch {batch} past {p}: {ms:.3f} ms", flush=True)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--validate", action="store_true")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--past", default="128,2048")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    import torch
    import transformers as tf
    if a.validate:
        validate(torch, tf)
        return
    if not torch.cuda.is_available():
        sys.exit("decode_torch_static: no CUDA device: timing runs on the GPU machine (--validate runs here)")
    r = times(torch, tf, a.batch, [int(x) for x in a.past.split(",")])
    if a.json:
        json.dump({str(k): v for k, v in r.items()}, open(a.json, "w"))


if __name__ == "__main__":
    main()
