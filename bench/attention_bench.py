#!/usr/bin/env python3
"""Attention micro-benchmark (issue 9, Deliver 4): fuseopt's CUDA attention
kernels against torch.nn.functional.scaled_dot_product_attention, same
process, same GPU.

Run on the GPU machine through bench/attention_bench.sh (which builds the
ctypes library here and runs this there). First a correctness pass: every
kernel on shapes that do not divide the tiles (causal with S_q != S_kv, GQA,
MQA, padding masks with a fully masked row, -inf and finfo.min fills),
against an fp32 torch reference of the fuseopt.Attention contract
(docs/fused_ops.md), outputs poisoned with NaN first. Then the timings:
8x12x512x64, 32x12x128x64, 4x16x2048x128, 1x16x8192x128 (B x H x S x D),
causal and not, with and without a key-padding mask, fp16 and bf16. Each
figure is the median over 9 rounds of one replay of a CUDA graph of 20 launches
(so no launch overhead), inputs resident on the GPU; every round replays each
kernel's graph and SDPA's in turn, starting one further along each round.
  ours   = launch_attention (the backend's dispatcher, default choice)
  hopper = the sm_90a kernel forced on: 128-row blocks, ping-pong between the
  consumer warpgroups, persistent grid, P·V as m64n128 (head dim 128);
  variants: nopp (no ping-pong), h64 (64-row blocks, head dim 64),
  nopers / h64_nopers (one block per work item), narrow (P·V as 2 x m64n64),
  h192 / h192_nopp (192-row blocks, three consumer warpgroups, head dim 64),
  cpers / h64_cpers (causal calls on the persistent grid too, snake order; 128 / 64 rows),
  k176 (head dim 128: 176-key tiles, 24 / 240 registers; without a mask only; "hopper" and
  the other variants run 128-key tiles), k176_cpers (the same, causal on the persistent grid),
  k160 / k160_cpers (head dim 128: 160-key tiles, O through shared memory and a TMA store),
  h64_direct / h64_cpers_direct / hopper_direct / h192_direct (head dim 64: O by 4-byte stores
  from the registers, as before session 34, instead of the staging buffer and TMA store),
  mma = the mma.sync kernel (v3)
  sdpa   = torch SDPA on contiguous [B,H,S,D] tensors (its own best layout);
           with a mask it gets attn_mask [B,1,1,S] (or [B,1,S,S] with causal)
FLOPs = 4*B*H*Sq*Skv*D, half of it under causal.
"""
import argparse
import ctypes
import math
import statistics
import sys

import torch
import torch.nn.functional as F

SHAPES = [(8, 12, 512, 64), (32, 12, 128, 64), (4, 16, 2048, 128), (1, 16, 8192, 128)]
# Hopper variants: 16 + bits (bench/attention_bench.cu): 1 no ping-pong, 2 64-row blocks,
# 4 one block per item (not persistent), 8 P·V as two m64n64 (head dim 128), 16 192-row blocks,
# 32 causal on the persistent grid (snake order), 64 176-key tiles (head dim 128), 128 O written
# by 4-byte stores from the registers instead of the staging buffer and TMA store (head dim 64),
# 256 160-key tiles with the TMA store (head dim 128).
KERNELS = {"ours": 0, "mma": 2, "hopper": 16, "nopp": 17, "h64": 18, "nopers": 20, "h64_nopers": 22, "narrow": 24,
           "h192": 32, "h192_nopp": 33, "cpers": 48, "h64_cpers": 50,
           "k176": 80, "k176_cpers": 112,
           "k160": 272, "k160_cpers": 304, "h64_direct": 146, "h64_cpers_direct": 178, "hopper_direct": 144, "h192_direct": 160}


def load(path):
    lib = ctypes.CDLL(path)
    ll, i, p, f = ctypes.c_longlong, ctypes.c_int, ctypes.c_void_p, ctypes.c_float
    lib.fo_attention.argtypes = [i, i, i, i, i, i, i, i, p, p, p, ll, ll, ll, ll, ll, ll, p, i, f, f, p, p, p]
    lib.fo_attention_mask_prefix.argtypes = [p, i, i, p, p]
    lib.fo_attention_mask_prefix.restype = i
    lib.fo_attention.restype = i
    lib.fo_attention_choice.argtypes = [i, i, i, i, i, i, i, p, p, p, ll, ll, ll, ll, ll, ll, p, i, f, p]
    lib.fo_attention_choice.restype = i
    return lib


class Case:
    """Q [B,S,H*D], K/V [B,Skv,Hkv*D] (or packed QKV [B,S,(H+2Hkv)*D]), bool mask [B,Skv]."""

    def __init__(self, B, H, Hkv, S, Skv, D, dtype, causal, mask, packed=False, fill=-math.inf, full_row=False,
                 mask_full=False):
        self.B, self.H, self.Hkv, self.S, self.Skv, self.D = B, H, Hkv, S, Skv, D
        self.dtype, self.causal, self.packed, self.fill = dtype, causal, packed, fill
        dev = "cuda"
        if packed:
            assert S == Skv
            w = (H + 2 * Hkv) * D
            self.qkv = (torch.rand(B, S, w, device=dev) * 4 - 2).to(dtype)
            self.q = self.qkv[:, :, : H * D]
            self.k = self.qkv[:, :, H * D : (H + Hkv) * D]
            self.v = self.qkv[:, :, (H + Hkv) * D :]
            self.strides = (S * w, w, S * w, w, S * w, w)
        else:
            self.q = (torch.rand(B, S, H * D, device=dev) * 4 - 2).to(dtype)
            self.k = (torch.rand(B, Skv, Hkv * D, device=dev) * 4 - 2).to(dtype)
            self.v = torch.rand(B, Skv, Hkv * D, device=dev).to(dtype)
            self.strides = (S * H * D, H * D, Skv * Hkv * D, Hkv * D, Skv * Hkv * D, Hkv * D)
        self.mask = None
        if mask:
            lens = torch.full((B,), Skv) if mask_full else torch.randint(max(1, Skv // 2), Skv + 1, (B,))
            if full_row:
                lens[0] = 0
            self.mask = (torch.arange(Skv)[None, :] < lens[:, None]).to(dev)
        self.y = torch.empty(B, S, H * D, device=dev, dtype=dtype)
        self.scale = 1.0 / math.sqrt(D)
        self.prefix = None  # the mask's per-batch key counts, by our kernel at the first run

    def mask_prefix(self, lib, stream):
        # Computed once per mask, as the runtime does once a forward for all its layers.
        if self.mask is None:
            return None
        if self.prefix is None:
            self.prefix = torch.empty(self.B, dtype=torch.int32, device="cuda")
            assert lib.fo_attention_mask_prefix(self.mask.data_ptr(), self.B, self.Skv, self.prefix.data_ptr(), stream) == 0
        return self.prefix.data_ptr()

    def args(self):
        return (
            0 if self.dtype == torch.float16 else 1,
            self.B, self.H, self.Hkv, self.S, self.Skv, self.D,
            self.q.data_ptr(), self.k.data_ptr(), self.v.data_ptr(), *self.strides,
            self.mask.data_ptr() if self.mask is not None else None,
            int(self.causal),
        )

    def run(self, lib, kernel, stream=None):
        s = stream if stream is not None else torch.cuda.current_stream().cuda_stream
        a = self.args()
        return lib.fo_attention(kernel, *a, self.scale, self.fill, self.y.data_ptr(), self.mask_prefix(lib, s), s)

    def choice(self, lib):
        return ["generic", "mma", "hopper"][lib.fo_attention_choice(*self.args(), self.scale, self.y.data_ptr())]

    def reference(self):
        B, H, Hkv, S, Skv, D = self.B, self.H, self.Hkv, self.S, self.Skv, self.D
        q = self.q.float().reshape(B, S, H, D).permute(0, 2, 1, 3)
        k = self.k.float().reshape(B, Skv, Hkv, D).permute(0, 2, 1, 3).repeat_interleave(H // Hkv, dim=1)
        v = self.v.float().reshape(B, Skv, Hkv, D).permute(0, 2, 1, 3).repeat_interleave(H // Hkv, dim=1)
        s = self.scale * (q @ k.transpose(-1, -2))
        if self.mask is not None:
            s = torch.where(self.mask[:, None, None, :], s, torch.full_like(s, self.fill))
        if self.causal:
            i = torch.arange(S, device=s.device)[:, None]
            j = torch.arange(Skv, device=s.device)[None, :]
            s = s.masked_fill(j > i + (Skv - S), -math.inf)
        p = torch.softmax(s, dim=-1)  # a row of -inf only gives NaN, as the contract says
        return (p @ v).permute(0, 2, 1, 3).reshape(B, S, H * D)

    def sdpa_inputs(self):
        B, H, Hkv, S, Skv, D = self.B, self.H, self.Hkv, self.S, self.Skv, self.D
        q = self.q.reshape(B, S, H, D).transpose(1, 2).contiguous()
        k = self.k.reshape(B, Skv, Hkv, D).transpose(1, 2).contiguous()
        v = self.v.reshape(B, Skv, Hkv, D).transpose(1, 2).contiguous()
        m = None
        if self.mask is not None:
            m = self.mask[:, None, None, :]
            if self.causal:
                i = torch.arange(S, device="cuda")[:, None]
                j = torch.arange(Skv, device="cuda")[None, :]
                m = m & (j <= i + (Skv - S))[None, None]
        return q, k, v, m


def check(lib, verbose):
    fails = 0
    n = 0
    ninf, fmin = -math.inf, torch.finfo(torch.float32).min
    configs = []
    for D in (64, 128):
        configs += [
            dict(B=1, H=4, Hkv=4, S=1, Skv=1, D=D, causal=False, mask=False, packed=True),
            dict(B=2, H=4, Hkv=4, S=17, Skv=17, D=D, causal=True, mask=False, packed=True),
            dict(B=1, H=32, Hkv=8, S=130, Skv=130, D=D, causal=True, mask=False),
            dict(B=2, H=4, Hkv=1, S=257, Skv=257, D=D, causal=False, mask=False),
            dict(B=1, H=4, Hkv=2, S=1000, Skv=1000, D=D, causal=True, mask=False, packed=True),
            dict(B=2, H=4, Hkv=2, S=100, Skv=257, D=D, causal=True, mask=False),
            dict(B=1, H=4, Hkv=4, S=257, Skv=130, D=D, causal=True, mask=False),  # first rows see nothing
            dict(B=3, H=4, Hkv=4, S=130, Skv=130, D=D, causal=False, mask=True, packed=True, full_row=True),
            dict(B=3, H=4, Hkv=4, S=257, Skv=257, D=D, causal=True, mask=True, fill=fmin, full_row=True),
            dict(B=2, H=4, Hkv=4, S=17, Skv=300, D=D, causal=False, mask=True, fill=-10000.0),
            dict(B=2, H=8, Hkv=8, S=1024, Skv=1024, D=D, causal=False, mask=False),
            dict(B=1, H=2, Hkv=2, S=2100, Skv=2100, D=D, causal=True, mask=True, fill=ninf, full_row=True),
            # more work items than blocks: the persistent grid walks several per block
            dict(B=4, H=16, Hkv=4, S=1024, Skv=1024, D=D, causal=False, mask=True, fill=fmin),
            dict(B=2, H=16, Hkv=16, S=2000, Skv=2000, D=D, causal=True, mask=False, packed=True),
        ]
    for cfg in configs:
        for dtype in (torch.float16, torch.bfloat16):
            c = Case(dtype=dtype, **cfg)
            want = c.reference()
            for name, kern in KERNELS.items():
                c.y.fill_(float("nan"))
                rc = c.run(lib, kern)
                torch.cuda.synchronize()
                if rc == 1:
                    continue
                n += 1
                got = c.y.float()
                nan_ok = bool(torch.equal(torch.isnan(got), torch.isnan(want)))
                fin = ~torch.isnan(want)
                err = (got[fin] - want[fin]).abs().max().item() if fin.any() else 0.0
                tol = 6e-2 if dtype == torch.bfloat16 else 1.5e-2
                ok = rc == 0 and nan_ok and err < tol
                if not ok or verbose:
                    print(f"{'ok  ' if ok else 'FAIL'} {name:6s} {str(dtype)[6:]:8s} {cfg} rc={rc} "
                          f"nan_match={nan_ok} max_abs={err:.3e}")
                fails += not ok
    print(f"== correctness: {n - fails}/{n} kernel runs match the fp32 reference")
    return fails


def make_graph(fn, iters=20):
    """A CUDA graph of `iters` launches of fn (after three warm-up calls on a side stream)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            fn()
    g.replay()
    torch.cuda.synchronize()
    return g


def time_graphs(graphs, iters=20, rounds=9):
    """Median µs a launch of each graph. The graphs are replayed in turn, round after round, each
    round starting one further along: a kernel timed in one block right after an idle gap ran at
    boost clocks the next ones did not get (session 33: the same 176-key kernel 249.9 µs first in
    its case and 275.1 µs third), so every kernel, SDPA included, now sees the same mix."""
    names = list(graphs)
    ts = {n: [] for n in names}
    for r in range(rounds):
        for i in range(len(names)):
            n = names[(r + i) % len(names)]
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            graphs[n].replay()
            b.record()
            torch.cuda.synchronize()
            ts[n].append(a.elapsed_time(b) * 1000.0 / iters)
    return {n: statistics.median(v) for n, v in ts.items()}


def bench(lib, shapes, kernels, mask_full=False, packed=False):
    rows = []
    for (B, H, S, D) in shapes:
        for dtype in (torch.float16, torch.bfloat16):
            for causal in (False, True):
                for mask in (False, True):
                    c = Case(B, H, H, S, S, D, dtype, causal, mask, packed=packed, mask_full=mask_full)
                    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
                    graphs, res = {}, {}
                    for name in kernels:
                        kern = KERNELS[name]
                        if c.run(lib, kern) != 0:
                            res[name] = None
                            continue
                        graphs[name] = make_graph(lambda kern=kern: c.run(lib, kern))
                    q, k, v, m = c.sdpa_inputs()
                    if m is None:
                        sd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    else:
                        sd = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m)
                    graphs["sdpa"] = make_graph(sd)
                    res.update(time_graphs(graphs))
                    res = {n: res[n] for n in list(kernels) + ["sdpa"]}
                    rows.append(((B, H, S, D), str(dtype)[6:], causal, mask, c.choice(lib), res, flops))
                    r = res
                    print(f"{B}x{H}x{S}x{D} {str(dtype)[6:]} causal={int(causal)} mask={int(mask)} "
                          + " ".join(f"{n}={r[n]:.1f}" if r[n] else f"{n}=-" for n in r), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="build-attn/libfo_attention_bench.so")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--kernels", default="ours,hopper,nopp,h64,nopers,h64_nopers,narrow")
    ap.add_argument("--profile-kernel", default="hopper")
    ap.add_argument("--only", default="", help="B,H,S,D[;B,H,S,D...]: bench these shapes only")
    ap.add_argument("--mask-full", action="store_true",
                    help="masks keep every key (a padding mask that pads nothing: a batch of full rows)")
    ap.add_argument("--packed", action="store_true", help="Q, K, V as views of one [B, S, 3·H·D] buffer")
    ap.add_argument("--profile", default="",
                    help="B,H,S,D[,causal[,mask]]: 5 plain launches of the Hopper kernel (for ncu); mask 1: a "
                         "padding mask that keeps every key (an export's all-ones mask)")
    args = ap.parse_args()
    torch.manual_seed(0)
    lib = load(args.lib)
    print(f"== {torch.cuda.get_device_name()} torch {torch.__version__}")
    if args.profile:
        v = [int(x) for x in args.profile.split(",")]
        c = Case(v[0], v[1], v[1], v[2], v[2], v[3], torch.float16, len(v) > 4 and v[4] != 0, len(v) > 5 and v[5] != 0,
                 mask_full=True)
        for _ in range(5):
            c.run(lib, KERNELS[args.profile_kernel])
        torch.cuda.synchronize()
        return
    shapes = [tuple(int(x) for x in sh.split(",")) for sh in args.only.split(";")] if args.only else SHAPES
    fails = 0 if args.no_check else check(lib, args.verbose)
    if not args.no_bench:
        rows = bench(lib, shapes, [k for k in args.kernels.split(",") if k], args.mask_full, args.packed)
        print("\n== attention micro-benchmark (us, median of 9 interleaved rounds of a 20-launch graph; TFLOP/s; ratio = sdpa/ours)")
        names = [k for k in args.kernels.split(",") if k and k != "ours"]
        print("| B×H×S×D | dtype | causal | mask | kernel | ours µs | TFLOP/s | "
              + " | ".join(f"{n} µs" for n in names) + " | SDPA µs | SDPA TFLOP/s | ratio |")
        print("|---" * (10 + len(names)) + "|")
        for (shape, dt, causal, mask, choice, r, flops) in rows:
            o = r.get("ours")
            f = lambda x: f"{x:.1f}" if x else "—"
            tf = lambda x: f"{flops / x / 1e6:.0f}" if x else "—"
            print(f"| {'×'.join(map(str, shape))} | {dt} | {'yes' if causal else 'no'} | {'yes' if mask else 'no'} | "
                  f"{choice} | {f(o)} | {tf(o)} | " + " | ".join(f(r.get(n)) for n in names)
                  + f" | {f(r['sdpa'])} | {tf(r['sdpa'])} | {(r['sdpa'] / o) if o else 0:.2f} |")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
