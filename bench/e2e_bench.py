#!/usr/bin/env python3
"""One end-to-end benchmark command (issue 9, Deliver 4), run on the GPU machine.

Exports full-size models with random weights (no downloads), optimizes them with
fuseopt, times them with fuserun (fp16, device latency: the captured CUDA graph
replayed with inputs and outputs on the GPU), and times the same PyTorch models
in the same run: eager (SDPA attention) and torch.compile(mode="reduce-overhead",
i.e. CUDA graphs), medians of triton.testing.do_bench. Prints a table and writes
it as JSON and as the markdown that goes into BENCHMARKS.md. Each table starts with the card's
fingerprint from the same run (SM and memory clocks, power limit, temperature, a 1 GiB copy's
TB/s, an 8192^3 fp16 GEMM's TFLOP/s): cards of one kind differ by up to 14 % end to end.

  python3 bench/e2e_bench.py --bin .gpu/bin [--models bert,gpt2,vit,llama]
      [--shapes bert=1x128,32x128,8x512 ...] [--torch eager,reduce-overhead]
      [--json FILE] [--markdown FILE] [--work DIR]
      [--base-bin DIR | --ab-disable PASSES | --ab-env VAR=VALUE ...] [--ab-rounds N]

--base-bin: an A/B of two builds in one run. DIR holds an earlier pack's bin/ (its lib/ beside
it: `tar -C .gpubase -xf .gpubase/pack.tar.xz`); the same fused model (fuseopt of --bin) runs
under both fuserun builds, alternated base / new N times (default 2), and the table gains a
"base" column (medians of the rounds; the "fused" column is then the new build's median).
--ab-disable: an A/B of fuseopt passes in one run: the base column is the model fused with
`fuseopt --disable PASSES`, both run by --bin's fuserun, alternated the same way.
--ab-env VAR=VALUE ...: an A/B of runtime settings in one run: the same fused model and fuserun,
the base column with those variables unset, the fused column with them set (an opt-in kernel
against the default, e.g. FUSEOPT_HOPPER_GEMM=1), alternated the same way.

Models (PyTorch + transformers configs built in code, seed 0):
  bert   BERT-base (hidden 768, 12 layers, 12 heads), TorchScript exporter, opset 17
  gpt2   GPT-2 small (124M), TorchScript exporter, opset 17
  vit    ViT-base/16 at 224x224 (197 tokens), TorchScript exporter, opset 17
  llama  Llama-3.2-1B-shaped (16 layers, hidden 2048, 32 query / 8 KV heads, FFN 8192,
         vocab 128256, no LM head), dynamo exporter, opset 18, external data
  bert_mlm  BERT-base with its masked-LM head (transform + decoder tied to the 30522-word
            embedding, logits [B, S, 30522]), TorchScript, opset 17
  gpt2_lm   GPT-2 small with its causal-LM head (lm_head tied to the 50257-token
            embedding, logits [B, S, 50257]), TorchScript, opset 17
Shapes are batch x sequence (ViT: batch).
"""
import argparse
import json
import os
import subprocess
import sys
import time

DEFAULT_SHAPES = {
    "bert": ["1x128", "32x128", "8x512"],
    "gpt2": ["1x128", "32x128", "8x512"],
    "vit": ["1", "32"],
    "llama": ["1x128", "1x2048"],
    "bert_mlm": ["1x128", "32x128"],
    "gpt2_lm": ["1x128", "32x128"],
}


def log(*a):
    print(*a, flush=True)


# ---- PyTorch models ------------------------------------------------------------------

def build(name, torch, tf, attn):
    torch.manual_seed(0)

    class Text(torch.nn.Module):
        def __init__(self, m, key="last_hidden_state"):
            super().__init__()
            self.m, self.key = m, key

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask)[self.key]

    class Vision(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, pixel_values):
            return self.m(pixel_values=pixel_values).last_hidden_state

    if name == "bert":
        return Text(tf.BertModel(tf.BertConfig(attn_implementation=attn), add_pooling_layer=False)), "text", 30000
    if name == "gpt2":
        return Text(tf.GPT2Model(tf.GPT2Config(attn_implementation=attn))), "text", 50000
    if name == "bert_mlm":  # the task head with the real vocabulary (issue 15)
        return Text(tf.BertForMaskedLM(tf.BertConfig(attn_implementation=attn)), "logits"), "text", 30000
    if name == "gpt2_lm":
        return Text(tf.GPT2LMHeadModel(tf.GPT2Config(attn_implementation=attn)), "logits"), "text", 50000
    if name == "vit":
        return Vision(tf.ViTModel(tf.ViTConfig(attn_implementation=attn), add_pooling_layer=False)), "vision", 0
    if name == "llama":
        cfg = tf.LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                             num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                             vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0,
                             tie_word_embeddings=True, attn_implementation=attn)
        return Text(tf.LlamaModel(cfg)), "text", 128000
    raise SystemExit(f"e2e_bench: unknown model '{name}' (known: {', '.join(DEFAULT_SHAPES)})")


def example_inputs(torch, kind, vocab, b, s, device="cpu"):
    if kind == "vision":
        return (torch.randn(b, 3, 224, 224, device=device),)
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(1, vocab, (b, s), generator=g).to(device)
    return ids, torch.ones(b, s, dtype=torch.int64, device=device)


def export(name, torch, tf, work):
    """Exports `name` once into work/; returns the .onnx path."""
    path = os.path.join(work, f"{name}.onnx")
    if os.path.exists(path):
        return path
    model, kind, vocab = build(name, torch, tf, "eager" if name != "llama" else "sdpa")
    model.eval()
    t0 = time.time()
    with torch.no_grad():
        if kind == "vision":
            args = example_inputs(torch, kind, vocab, 2, 0)
            torch.onnx.export(model, args, path, input_names=["pixel_values"], output_names=["out"], opset_version=17,
                              dynamic_axes={"pixel_values": {0: "batch"}, "out": {0: "batch"}}, dynamo=False)
        elif name == "llama":
            args = example_inputs(torch, kind, vocab, 2, 16)
            b, s = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=8192)
            ds = ({0: b, 1: s}, {0: b, 1: s})
            prog = torch.onnx.export(model, args, dynamic_shapes=ds, input_names=["input_ids", "attention_mask"],
                                     output_names=["out"], opset_version=18, dynamo=True, external_data=True)
            prog.save(path, external_data=True)
        else:
            args = example_inputs(torch, kind, vocab, 2, 16)
            names = ["input_ids", "attention_mask"]
            dyn = {n: {0: "batch", 1: "seq"} for n in names + ["out"]}
            torch.onnx.export(model, args, path, input_names=names, output_names=["out"], opset_version=17,
                              dynamic_axes=dyn, dynamo=False)
    log(f"exported {name} in {time.time() - t0:.0f} s -> {path}")
    return path


# ---- fuseopt + fuserun ---------------------------------------------------------------

def fuse(bin_dir, src, out_dir, disable=""):
    tag = "_fused" + (("_no_" + disable.replace(",", "_")) if disable else "")
    dst = os.path.join(out_dir, os.path.basename(src).replace(".onnx", tag + ".onnx"))
    if not os.path.exists(dst):
        extra = ["--disable", disable] if disable else []
        r = subprocess.run([os.path.join(bin_dir, "fuseopt"), src, dst, "-q", "--report", dst + ".report.json", *extra],
                           capture_output=True, text=True)
        if r.returncode != 0:
            log(f"fuseopt failed on {src}: {r.stderr.strip()}")
            return None
    return dst


def shape_flags(kind, shape):
    if kind == "vision":
        return ["--shape", f"batch={shape}"]
    b, s = shape.split("x")
    return ["--shape", f"batch={b}", "--shape", f"seq={s}"]


def fuserun(bin_dir, model, kind, shape, json_path, iters, extra_env=None):
    cmd = [os.path.join(bin_dir, "fuserun"), model, "--backend", "cuda", "--precision", "fp16",
           *shape_flags(kind, shape), "--warmup", "10", "--iters", "3", "--device-iters", str(iters),
           "--json", json_path, "-q"]
    # Each build with its own libraries first (LD_LIBRARY_PATH outranks the binaries' RUNPATH).
    env = dict(os.environ)
    for k, v in (extra_env or {}).items():  # None: the variable unset
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    lib = os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "lib")
    env["LD_LIBRARY_PATH"] = lib + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        log(f"fuserun failed: {' '.join(cmd)}\n{(r.stderr or r.stdout).strip()[-800:]}")
        return None
    with open(json_path) as f:
        js = json.load(f)
    dev = js.get("device_latency_ms")
    return dev["median"] if dev else js["latency_ms"]["median"]


# ---- PyTorch anchors -----------------------------------------------------------------

def torch_times(name, torch, tf, shapes, modes):
    from triton.testing import do_bench
    model, kind, vocab = build(name, torch, tf, "sdpa")
    model = model.eval().cuda().half()
    out = {}
    for shape in shapes:
        b, s = (int(shape), 0) if kind == "vision" else (int(x) for x in shape.split("x"))
        args = example_inputs(torch, kind, vocab, b, s, "cuda")
        if kind == "vision":
            args = (args[0].half(),)
        for mode in modes:
            try:
                fn = model if mode == "eager" else torch.compile(model, mode=mode, dynamic=False)
                with torch.no_grad():
                    for _ in range(3):
                        fn(*args)
                    torch.cuda.synchronize()
                    ms = do_bench(lambda: fn(*args), warmup=25, rep=150)
            except Exception as e:  # a failed anchor is reported, not fatal
                log(f"torch {mode} {name} {shape}: {type(e).__name__}: {str(e)[:200]}")
                ms = None
            out[(shape, mode)] = ms
            if ms is not None:
                log(f"torch {mode:16s} {name:6s} {shape:7s} {ms:.3f} ms")
            torch._dynamo.reset()
    return out


# ---- table ---------------------------------------------------------------------------

def card_fingerprint(torch):
    """What sets this card apart from another of its kind: cards of one kind have differed by up
    to 14 % end to end with the same build (NOTES-perf.md v47-v48: Llama 1x128 1.30-1.49 ms on
    four H100s), so every table carries the card's clocks, its copy bandwidth and a fixed GEMM's
    rate, measured in the same run."""
    info = {"name": torch.cuda.get_device_name()}
    fields = "clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu"
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                            "-i", str(torch.cuda.current_device())], capture_output=True, text=True, timeout=20)
        if r.returncode == 0 and r.stdout.strip():
            info.update(zip(fields.split(","), (v.strip() for v in r.stdout.strip().splitlines()[0].split(","))))
    except (OSError, subprocess.TimeoutExpired):
        pass

    def best_ms(fn, reps=10):
        for _ in range(3):
            fn()
        best = None
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            t = s.elapsed_time(e)
            best = t if best is None else min(best, t)
        return best

    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    info["copy_tb_s"] = round(2 * x.numel() / (best_ms(lambda: y.copy_(x)) * 1e-3) / 1e12, 2)  # read + write
    del x, y
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    info["gemm_fp16_tflops"] = round(2 * n ** 3 / (best_ms(lambda: a @ b) * 1e-3) / 1e12)
    del a, b
    torch.cuda.empty_cache()
    return info


def card_line(info):
    keys = ("clocks.sm", "clocks.max.sm", "clocks.mem", "power.limit", "temperature.gpu", "copy_tb_s",
            "gemm_fp16_tflops")
    return f"Card: {info['name']}; " + ", ".join(f"{k} {info[k]}" for k in keys if k in info)


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2 if xs else None


def markdown(rows, modes, command, ab=False):
    head = "| model | shape |" + (" base (fused) |" if ab else "") + " fuseopt (fused) | fuseopt (unfused) |"
    head += "".join(f" torch {m} |" for m in modes)
    head += " ratio vs torch.compile |\n|---|---|" + ("---|" if ab else "") + "---|---|" + "---|" * len(modes) + "---|\n"
    body = ""
    for r in rows:
        def f(x):
            return f"{x:.3f}" if x is not None else "—"
        ro = r["torch"].get("reduce-overhead")
        ratio = f"{ro / r['fused']:.2f}× {'faster' if ro > r['fused'] else 'slower'}" if ro and r["fused"] else "—"
        body += f"| {r['model']} | {r['shape']} |" + (f" {f(r.get('base'))} |" if ab else "")
        body += f" {f(r['fused'])} | {f(r['unfused'])} |"
        body += "".join(f" {f(r['torch'].get(m))} |" for m in modes) + f" {ratio} |\n"
    return f"Command: `{command}`\n\n" + head + body


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=".gpu/bin", help="folder with fuseopt and fuserun")
    ap.add_argument("--models", default="bert,gpt2,vit,llama")
    ap.add_argument("--shapes", nargs="*", default=[], help="MODEL=S1,S2 overrides, e.g. bert=1x128,8x512")
    ap.add_argument("--torch", default="eager,reduce-overhead", help="PyTorch modes ('' for none)")
    ap.add_argument("--unfused", action="store_true", help="also time the exported model without fuseopt")
    ap.add_argument("--iters", type=int, default=100,
                    help="CUDA graph replays timed per shape (fuserun --device-iters; 3 host runs)")
    ap.add_argument("--work", default="/tmp/fuseopt-e2e")
    ap.add_argument("--json", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--base-bin", default="", help="an earlier build's bin/ for an A/B on the same fused model")
    ap.add_argument("--ab-rounds", type=int, default=2, help="base / new alternations with --base-bin or --ab-disable")
    ap.add_argument("--ab-disable", default="",
                    help="an A/B of fuseopt passes: the base column is the model fused with --disable PASSES, run by "
                         "the same fuserun, alternated with the default fusion (--ab-rounds times)")
    ap.add_argument("--ab-env", nargs="*", default=[], metavar="VAR=VALUE",
                    help="an A/B of runtime settings: the same fused model and fuserun, the base column without "
                         "these environment variables, the fused column with them (e.g. FUSEOPT_HOPPER_GEMM=1)")
    a = ap.parse_args()
    ab_env = {}
    for kv in a.ab_env:
        k, eq, v = kv.partition("=")
        if not k or not eq:
            ap.error(f"--ab-env takes VAR=VALUE, got '{kv}'")
        ab_env[k] = v
    if sum(bool(x) for x in (a.base_bin, a.ab_disable, ab_env)) > 1:
        ap.error("--base-bin, --ab-disable and --ab-env are separate A/B kinds: pick one")
    ab = bool(a.base_bin or a.ab_disable or ab_env)
    # Both builds' binaries before any export: the pack's bin/ exists only once unpacked
    # (`tools/gpu.sh run` does it; a bare device command finds the tarball alone).
    for d, tools in ((a.bin, ("fuseopt", "fuserun")), (a.base_bin, ("fuserun",))):
        for tool in tools if d else ():
            if not os.access(os.path.join(d, tool), os.X_OK):
                sys.exit(f"e2e_bench: no executable {tool} in {d}: unpack the pack first "
                         f"(tools/gpu.sh run -t none -- python3 bench/e2e_bench.py ...)")
    import torch
    import transformers as tf
    if not torch.cuda.is_available():
        sys.exit("e2e_bench: no CUDA device: this benchmark runs on the GPU machine")
    os.makedirs(a.work, exist_ok=True)
    card = card_fingerprint(torch)
    log(card_line(card))
    shapes = dict(DEFAULT_SHAPES)
    for o in a.shapes:
        k, _, v = o.partition("=")
        shapes[k] = v.split(",")
    modes = [m for m in a.torch.split(",") if m]
    rows = []
    for name in a.models.split(","):
        src = export(name, torch, tf, a.work)
        fused = fuse(a.bin, src, a.work)
        kind = "vision" if name == "vit" else "text"
        for shape in shapes[name]:
            jf = os.path.join(a.work, f"{name}_{shape}.json")
            t_b = None
            if ab and fused:
                new, base = [], []
                base_model = fuse(a.bin, src, a.work, a.ab_disable) if a.ab_disable else fused
                # The base runs without the --ab-env settings even where the caller's shell has them.
                base_env = {k: None for k in ab_env}
                for _ in range(a.ab_rounds):
                    base.append(fuserun(a.base_bin or a.bin, base_model, kind, shape, jf, a.iters, base_env))
                    new.append(fuserun(a.bin, fused, kind, shape, jf, a.iters, ab_env))
                log(f"A/B {name:6s} {shape:7s} base {base} new {new}")
                t_b, t_f = median(base), median(new)
            else:
                t_f = fuserun(a.bin, fused, kind, shape, jf, a.iters) if fused else None
            t_u = fuserun(a.bin, src, kind, shape, jf, a.iters) if a.unfused else None
            log(f"fuserun {name:6s} {shape:7s} fused {t_f} ms" + (f", unfused {t_u} ms" if a.unfused else ""))
            rows.append({"model": name, "shape": shape, "fused": t_f, "unfused": t_u, "base": t_b, "torch": {}})
        if modes:
            tt = torch_times(name, torch, tf, shapes[name], modes)
            for r in rows:
                if r["model"] == name:
                    r["torch"] = {m: tt.get((r["shape"], m)) for m in modes}
    cmd = "python3 bench/e2e_bench.py " + " ".join(sys.argv[1:])
    md = card_line(card) + "\n\n" + markdown(rows, modes, cmd, ab)
    log("\n" + md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "card": card, "torch": torch.__version__, "rows": rows},
                      f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md)


if __name__ == "__main__":
    main()
