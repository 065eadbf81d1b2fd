#!/usr/bin/env python3
"""Decode benchmark (issue 11): one new token of a Llama-3.2-1B-shaped decoder
with a KV cache, fuseopt + fuserun against PyTorch in the same run. Runs on the
GPU machine (random weights, no downloads).

  python3 bench/decode_bench.py --bin .gpu/bin [--batches 1,8] [--past 128,2048] [--loop N]
      [--exporter ts|dynamo] [--dtype fp32,fp16] [--kv-cache copy,hold] [--json FILE] [--markdown FILE]

The export is one decoder step with flat inputs: input_ids [B, 1], attention_mask
[B, P + 1], past_key_values.{i}.{key,value} [B, 8, P, 64] for the 16 layers, and
outputs the last hidden state and present.{i}.{key,value} [B, 8, P + 1, 64].
--dtype picks the exported model's type: fp32 (the model as built; fuserun --precision fp16
converts the float32 cache tensors to and from fp16 every step) and/or fp16 (model.half()
before the export, eager attention, as fp16 deployments export: the cache crosses the
interface in fp16, as torch's static cache keeps it).
fuserun times it with --past P (fp16, device latency of the replayed CUDA graph); --loop N adds
a generation loop of N steps per point (fuserun --generate: a new shape every step, no graph
replay: what an application's loop sees today).
--kv-cache: "copy" times the step as ONNX defines it (the present a new tensor: the whole cache
copied every step); "hold" with the cache held by the session (fuserun --kv-cache hold,
Session::hold_kv_cache: the step appends its row in place, as torch's static cache does; the
timed step is rewound to P before each run). Loops run with the same mode.
PyTorch: eager with a DynamicCache of P tokens, and torch.compile(mode=
"reduce-overhead") with a StaticCache of max_cache_len = max(P) + 16 (one compile
per batch size; its attention spans the whole static cache, as in HF generate), and
"static-compile": the same step written out with its cache in module buffers
(bench/decode_torch_static.py), torch.compile(mode="reduce-overhead", fullgraph=True)
-- the anchor, since transformers' StaticCache under torch.compile segfaults here.
"""
import argparse
import json
import os
import subprocess
import sys
import time

LAYERS, KV_HEADS, HEAD_DIM = 16, 8, 64


def log(*a):
    print(*a, flush=True)


def build(torch, tf, attn="sdpa"):
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=LAYERS,
                         num_attention_heads=32, num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM,
                         vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0,
                         tie_word_embeddings=True, attn_implementation=attn)
    return tf.LlamaModel(cfg).eval()


def cache_from(tf, flat):
    cache = tf.DynamicCache()
    for i in range(LAYERS):
        cache.update(flat[2 * i], flat[2 * i + 1], i)
    return cache


def cache_tensors(cache):
    out = []
    for i in range(LAYERS):
        if hasattr(cache, "layers"):
            out += [cache.layers[i].keys, cache.layers[i].values]
        else:
            out += [cache.key_cache[i], cache.value_cache[i]]
    return out


def export(torch, tf, path, exporter, dtype="fp32"):
    if os.path.exists(path):
        return path
    dev, dt = "cpu", torch.float32
    if dtype == "fp16":
        # Traced on the GPU (CPU half kernels are incomplete), with HF's eager attention: its
        # softmax(dtype=float32).to(fp16) keeps P·V and the residual stream in fp16, which the
        # Attention fusion takes. TorchScript's fp16 SDPA decomposition runs P·V and the rest
        # of the layer in float32 (docs/fused_ops.md, rule 5): a mixed-precision model, not an
        # fp16 one, left unfused on purpose.
        dev, dt = "cuda", torch.float16
        model = build(torch, tf, attn="eager").to(dev, dt)
    else:
        model = build(torch, tf)

    class Step(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, *past):
            cache = cache_from(tf, list(past))
            r = self.m(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
            return (r.last_hidden_state, *cache_tensors(r.past_key_values))

    step = Step(model).eval()
    B, P = 2, 16
    ids = torch.randint(1, 128000, (B, 1), device=dev)
    mask = torch.ones(B, P + 1, dtype=torch.int64, device=dev)
    past = [torch.randn(B, KV_HEADS, P, HEAD_DIM, device=dev, dtype=dt) for _ in range(2 * LAYERS)]
    names = ["input_ids", "attention_mask"] + [f"past_key_values.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    outs = ["last_hidden_state"] + [f"present.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    t0 = time.time()
    with torch.no_grad():
        if exporter == "ts":
            dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
                   "last_hidden_state": {0: "batch", 1: "seq"}}
            for n in names[2:]:
                dyn[n] = {0: "batch", 2: "past"}
            for n in outs[1:]:
                dyn[n] = {0: "batch", 2: "total"}
            torch.onnx.export(step, (ids, mask, *past), path, input_names=names, output_names=outs, opset_version=17,
                              dynamic_axes=dyn, dynamo=False)
        else:
            b, p = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("past", min=1, max=8192)
            # forward(input_ids, attention_mask, *past): the varargs are one element.
            ds = ({0: b}, {0: b, 1: p + 1}, tuple({0: b, 2: p} for _ in past))
            prog = torch.onnx.export(step, (ids, mask, *past), dynamic_shapes=ds, input_names=names,
                                     output_names=outs, opset_version=18, dynamo=True, external_data=True)
            prog.save(path, external_data=True)
    log(f"exported the decoder step ({exporter}, {dtype}) in {time.time() - t0:.0f} s -> {path}")
    return path


def fuse(bin_dir, src):
    dst = src.replace(".onnx", "_fused.onnx")
    if not os.path.exists(dst):
        r = subprocess.run([os.path.join(bin_dir, "fuseopt"), src, dst, "-q", "--report", dst + ".report.json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            log(f"fuseopt failed: {r.stderr.strip()}")
            return None
    rep = json.load(open(dst + ".report.json"))
    att = [p for p in rep.get("patterns", []) if p.get("name") == "Attention"]
    if att:
        log(f"fuseopt: Attention matched {att[0]['matched']}, rejected {att[0]['rejected']}"
            + (f" ({att[0]['reasons'][0][:200]})" if att[0]["reasons"] else ""))
    return dst


def fuserun(bin_dir, model, batch, past, iters, loop=0, kv="copy"):
    """One decode step replayed (device latency, ms), or with loop N the median ms per step of a
    generation loop (fuserun --generate N: a new shape every step, no graph replay)."""
    js = model + f".{batch}x{past}.{kv}{'.loop' if loop else ''}.json"
    timing = ["--generate", str(loop)] if loop else ["--warmup", "20", "--iters", str(iters)]
    cmd = [os.path.join(bin_dir, "fuserun"), model, "--backend", "cuda", "--precision", "fp16", "--past", str(past),
           "--shape", f"batch={batch}", "--kv-cache", kv] + timing + ["--json", js, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        log(f"fuserun failed: {' '.join(cmd)}\n{(r.stderr or r.stdout).strip()[-600:]}")
        return None
    d = json.load(open(js))
    if loop:
        return d["generate"]["median_step_ms"]
    dev = d.get("device_latency_ms")
    return dev["median"] if dev else d["latency_ms"]["median"]


def torch_times(torch, tf, batches, pasts, modes):
    from triton.testing import do_bench
    model = build(torch, tf).cuda().half()
    res = {}
    max_len = max(pasts) + 16
    for b in batches:
        ids = torch.randint(1, 128000, (b, 1), device="cuda")
        if "eager" in modes:
            for p in pasts:
                past = [torch.randn(b, KV_HEADS, p, HEAD_DIM, device="cuda", dtype=torch.half) for _ in range(2 * LAYERS)]
                mask = torch.ones(b, p + 1, dtype=torch.int64, device="cuda")

                def step():
                    cache = cache_from(tf, past)
                    return model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True)
                with torch.no_grad():
                    ms = do_bench(step, warmup=25, rep=150)
                res[(b, p, "eager")] = ms
                log(f"torch eager (DynamicCache)     batch {b} past {p}: {ms:.3f} ms")
        if "static-compile" in modes:
            import decode_torch_static as dts  # written-out step, static cache in buffers
            for p, ms in dts.times(torch, tf, b, pasts).items():
                res[(b, p, "static-compile")] = ms
        if "reduce-overhead" in modes:
            try:
                cache = tf.StaticCache(config=model.config, max_batch_size=b, max_cache_len=max_len,
                                       device="cuda", dtype=torch.half)
            except TypeError:
                cache = tf.StaticCache(config=model.config, max_cache_len=max_len)
            fn = torch.compile(model, mode="reduce-overhead", fullgraph=False)
            for p in pasts:
                pos = torch.tensor([p], device="cuda")

                def step():
                    return fn(input_ids=ids, past_key_values=cache, cache_position=pos, use_cache=True)
                try:
                    with torch.no_grad():
                        for _ in range(3):
                            step()
                        torch.cuda.synchronize()
                        ms = do_bench(step, warmup=25, rep=150)
                except Exception as e:
                    log(f"torch.compile batch {b} past {p}: {type(e).__name__}: {str(e)[:300]}")
                    ms = None
                res[(b, p, "reduce-overhead")] = ms
                if ms is not None:
                    log(f"torch.compile (StaticCache {max_len}) batch {b} past {p}: {ms:.3f} ms")
            torch._dynamo.reset()
    return res


def torch_times_isolated(batches, pasts, modes, work):
    """torch_times, one child process per (mode, batch): torch.compile with a
    StaticCache has crashed the whole process (a segfault in session 4), which
    must cost that one row, not the fuseopt figures already measured."""
    res = {}
    for m in modes:
        for b in batches:
            out = os.path.join(work, f"torch_{m}_{b}.json")
            if os.path.exists(out):
                os.remove(out)
            cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", out, "--torch", m,
                   "--batches", str(b), "--past", ",".join(map(str, pasts))]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            for line in (r.stdout + r.stderr).splitlines():
                if line.startswith("torch"):
                    log(line)
            if r.returncode != 0:
                log(f"torch {m} batch {b}: worker exited with {r.returncode}: {(r.stderr or '').strip()[-300:]}")
            if os.path.exists(out):
                for k, v in json.load(open(out)).items():
                    res[(b, int(k), m)] = v
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=".gpu/bin")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--past", default="128,2048")
    ap.add_argument("--exporter", default="ts", choices=["ts", "dynamo"])
    ap.add_argument("--dtype", default="fp32,fp16", help="exported model types, comma-separated (fp32, fp16)")
    ap.add_argument("--torch", default="eager,static-compile")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--loop", type=int, default=0,
                    help="also a generation loop of N steps per point (fuserun --generate: no graph replay)")
    ap.add_argument("--kv-cache", default="copy,hold", help="fuserun's KV cache modes, comma-separated (copy, hold)")
    ap.add_argument("--work", default="/tmp/fuseopt-decode")
    ap.add_argument("--json", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--torch-worker", default="", help=argparse.SUPPRESS)  # child of torch_times_isolated
    a = ap.parse_args()
    import torch
    import transformers as tf
    if not torch.cuda.is_available():
        sys.exit("decode_bench: no CUDA device: this benchmark runs on the GPU machine")
    if a.torch_worker:
        b = int(a.batches)
        tt = torch_times(torch, tf, [b], [int(x) for x in a.past.split(",")], [a.torch])
        json.dump({str(p): ms for (_, p, _), ms in tt.items()}, open(a.torch_worker, "w"))
        return
    os.makedirs(a.work, exist_ok=True)
    batches = [int(x) for x in a.batches.split(",")]
    pasts = [int(x) for x in a.past.split(",")]
    modes = [m for m in a.torch.split(",") if m]
    dtypes = [d for d in a.dtype.split(",") if d]
    for d in dtypes:
        if d not in ("fp32", "fp16"):
            sys.exit(f"decode_bench: --dtype {d}: expected fp32 or fp16")
    kvs = [k for k in a.kv_cache.split(",") if k]
    for k in kvs:
        if k not in ("copy", "hold"):
            sys.exit(f"decode_bench: --kv-cache {k}: expected copy or hold")
    # Columns: an export type, with " held" where the session holds the cache.
    forms = [(d, k) for d in dtypes for k in kvs]
    key = lambda d, k: d if k == "copy" else d + "_held"  # noqa: E731
    fused = {}
    for d in dtypes:
        suffix = "" if d == "fp32" else "_fp16"
        src = export(torch, tf, os.path.join(a.work, f"llama_decode_{a.exporter}{suffix}.onnx"), a.exporter, d)
        fused[d] = fuse(a.bin, src)
    rows = []
    for b in batches:
        for p in pasts:
            r = {"batch": b, "past": p}
            for d, k in forms:
                c = key(d, k)
                r["fuseopt_" + c] = fuserun(a.bin, fused[d], b, p, a.iters, kv=k) if fused[d] else None
                log(f"fuserun {d} export, kv {k}, batch {b} past {p}: {r['fuseopt_' + c]} ms")
                if a.loop:
                    r["loop_" + c] = fuserun(a.bin, fused[d], b, p, a.iters, loop=a.loop, kv=k) if fused[d] else None
                    log(f"fuserun --generate {a.loop} {d} export, kv {k}, batch {b} past {p}: {r['loop_' + c]} ms per step")
            # The figure compared: the fastest form (the user picks the export and the cache mode).
            ts = [r["fuseopt_" + key(d, k)] for d, k in forms if r["fuseopt_" + key(d, k)] is not None]
            r["fuseopt"] = min(ts) if ts else None
            rows.append(r)
    tt = torch_times_isolated(batches, pasts, modes, a.work) if modes else {}
    for r in rows:
        r["torch"] = {m: tt.get((r["batch"], r["past"], m)) for m in modes}
    cmd = "python3 bench/decode_bench.py " + " ".join(sys.argv[1:])
    f = lambda x: f"{x:.3f}" if x is not None else "—"  # noqa: E731
    cols = [key(d, k) for d, k in forms]
    loops = cols if a.loop else []
    name = lambda c: c.replace("_held", " export, held cache") if c.endswith("_held") else c + " export"  # noqa: E731
    md = f"Command: `{cmd}`\n\n| batch | cached tokens |" + "".join(f" fuseopt, {name(c)} |" for c in cols)
    md += "".join(f" fuseopt loop ({a.loop} steps), {name(c)} |" for c in loops)
    md += "".join(f" torch {m} |" for m in modes)
    md += " ratio vs torch.compile |\n|---|---|" + "---|" * (len(cols) + len(loops) + len(modes)) + "---|\n"
    for r in rows:
        ro = r["torch"].get("static-compile") or r["torch"].get("reduce-overhead")
        ratio = f"{ro / r['fuseopt']:.2f}×" if ro and r["fuseopt"] else "—"
        md += f"| {r['batch']} | {r['past']} |" + "".join(f" {f(r['fuseopt_' + c])} |" for c in cols)
        md += "".join(f" {f(r.get('loop_' + c))} |" for c in loops)
        md += "".join(f" {f(r['torch'].get(m))} |" for m in modes) + f" {ratio} |\n"
    log("\n" + md)
    if a.json:
        json.dump({"rows": rows, "torch": torch.__version__}, open(a.json, "w"), indent=1)
    if a.markdown:
        open(a.markdown, "w").write(md)


if __name__ == "__main__":
    main()
