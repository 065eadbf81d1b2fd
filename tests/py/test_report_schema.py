"""The JSON files fuseopt --report and fuserun --json write match their documented
schemas (docs/report_schema.md): every documented field that is `always` present is
there with the documented type, every field in the file is documented, and the
"schema" key names the version. No jsonschema package: the tables are parsed here
(paths like `passes[].name`, `ops_before.*`) and the files walked against them."""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fuseopt_testlib as lib  # noqa: E402

PY_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def parse_schemas(doc_path):
    """{schema name: {path: (types, always)}} from the '## `name`' sections' tables."""
    schemas, current = {}, None
    for line in open(doc_path, encoding="utf-8"):
        m = re.match(r"^## `([^`]+)`", line)
        if m:
            current = schemas.setdefault(m.group(1), {})
            continue
        m = re.match(r"^\| `([^`]+)` \| ([a-z ]+) \| ([^|]+) \|", line)
        if current is not None and m:
            types = [t.strip() for t in m.group(2).split(" or ")]
            for t in types:
                assert t in PY_TYPES, f"{doc_path}: unknown type '{t}' for {m.group(1)}"
            current[m.group(1)] = (types, m.group(3).strip() == "always")
    return schemas


def walk(value, path, out, doc):
    """Every (path, value) in a JSON value, paths spelled as in the doc: `a[]` for
    array elements, `a.*` for the values of an object documented as name-keyed."""
    if path:
        out.append((path, value))
    if isinstance(value, dict):
        for k, v in value.items():
            child = f"{path}.*" if f"{path}.*" in doc else (f"{path}.{k}" if path else k)
            walk(v, child, out, doc)
    elif isinstance(value, list):
        for v in value:
            walk(v, f"{path}[]", out, doc)
    return out


def validate(doc, data, expect):
    """Problems of `data` against the schema `doc` ({path: (types, always)})."""
    problems = []
    seen = {}
    for p, value in walk(data, "", [], doc):
        path = p
        seen.setdefault(p, []).append(value)
        if p not in doc:
            problems.append(f"field '{path}' is not documented")
            continue
        types, _ = doc[p]
        if not any(PY_TYPES[t](value) for t in types):
            problems.append(f"field '{path}' is {type(value).__name__}, documented as {' or '.join(types)}")

    def parent(p):
        if p.endswith("[]"):
            return p[:-2]
        return p.rpartition(".")[0]

    for p, (types, always) in doc.items():
        if not always or p in seen:
            continue
        pp = parent(p)
        # Required when its parent is there with something in it (an empty array or
        # a name-keyed object with no names has no children to check).
        if pp == "" or any(isinstance(v, (dict, list)) and v for v in seen.get(pp, [])):
            problems.append(f"documented field '{p}' (always present) is missing")
    for p in expect:
        if p not in seen:
            problems.append(f"expected field '{p}' is missing")
    return problems


def main():
    args = lib.parse_args()
    doc_path = os.path.join(args.src, "docs/report_schema.md")
    model_dir = os.path.join(args.src, "models/real/bert_eager_op17_ts")
    if not os.path.exists(os.path.join(model_dir, "model.onnx")):
        print("SKIP: models/real/bert_eager_op17_ts is missing")
        return lib.SKIP
    schemas = parse_schemas(doc_path)
    failures = []
    expect = lib.expecter(failures)

    expect({"fuseopt.report/1", "fuseopt.run/1", "fuseopt.generate/1"} <= set(schemas),
           f"the doc has the three schemas (found {sorted(schemas)})")
    if failures:
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.onnx")
        for extra in ([], ["--emit", "standard"]):
            rep = os.path.join(tmp, "report.json")
            r = lib.run_fuseopt(args.bin, os.path.join(model_dir, "model.onnx"), out, "-q", "--report", rep, *extra)
            expect(r.returncode == 0, f"fuseopt {' '.join(extra)} --report exits 0 ({r.stderr.strip()})")
            if r.returncode != 0:
                continue
            data = json.load(open(rep, encoding="utf-8"))
            expect(data.get("schema") == "fuseopt.report/1", "the report names its schema fuseopt.report/1")
            expect(list(data)[0] == "schema", "'schema' is the first key")
            # Fields inside arrays this model fills: they must be there.
            inner = ["passes[].name", "passes[].millis", "patterns[].reasons", "ops_before.*"]
            if extra:
                inner += ["emit.ops[].op", "emit.ops[].reasons", "emit.notes"]
            problems = validate(schemas["fuseopt.report/1"], data, inner)
            expect(not problems, f"report {' '.join(extra) or '(default)'} matches the documented schema"
                   + ("" if not problems else ": " + "; ".join(problems[:8])))

        # fuserun --json, with --check and --profile so every optional section is there.
        js = os.path.join(tmp, "run.json")
        r = subprocess.run([os.path.join(args.bin, "fuserun"), out, "--backend", "cpu", "--check",
                            os.path.join(model_dir, "test_data_set_0"), "--iters", "2", "--profile", "--json", js, "-q"],
                           capture_output=True, text=True, timeout=600)
        expect(r.returncode == 0, f"fuserun --json exits 0 ({r.stderr.strip()[:300]})")
        if r.returncode == 0:
            data = json.load(open(js, encoding="utf-8"))
            expect(data.get("schema") == "fuseopt.run/1", "fuserun's file names its schema fuseopt.run/1")
            inner = ["inputs.*.dtype", "outputs[].shape[]", "latency_ms.all[]", "check.outputs[].rel_err",
                     "profile.by_node[].host", "profile.by_op_type[].nodes"]
            problems = validate(schemas["fuseopt.run/1"], data, inner)
            expect(not problems, "fuserun --json matches the documented schema"
                   + ("" if not problems else ": " + "; ".join(problems[:8])))
            # The CPU backend replays no CUDA graph: no device latency, 0 replays.
            expect(data.get("device_latency_ms") is None and data.get("device_iters") == 0,
                   f"fuserun on the CPU times no device replays (device_iters {data.get('device_iters')})")
        # --device-iters takes a count: a negative one is refused with a non-zero exit, naming the option.
        r = subprocess.run([os.path.join(args.bin, "fuserun"), out, "--backend", "cpu", "--device-iters", "-1"],
                           capture_output=True, text=True, timeout=600)
        expect(r.returncode != 0 and "device-iters" in (r.stderr + r.stdout),
               f"fuserun --device-iters -1 is refused naming the option (exit {r.returncode}: {r.stderr.strip()[:200]})")

        # fuserun --generate --json: its own schema; the fused KV model holds its cache.
        kv = os.path.join(args.src, "models/synthetic/kv_llama_gqa/model.onnx")
        kv_fused, gen = os.path.join(tmp, "kv.onnx"), os.path.join(tmp, "gen.json")
        r = lib.run_fuseopt(args.bin, kv, kv_fused, "-q")
        expect(r.returncode == 0, f"fuseopt on kv_llama_gqa exits 0 ({r.stderr.strip()[:300]})")
        r = subprocess.run([os.path.join(args.bin, "fuserun"), kv_fused, "--backend", "cpu", "--past", "3",
                            "--generate", "3", "--json", gen, "-q"], capture_output=True, text=True, timeout=600)
        expect(r.returncode == 0, f"fuserun --generate --json exits 0 ({r.stderr.strip()[:300]})")
        if r.returncode == 0:
            data = json.load(open(gen, encoding="utf-8"))
            expect(data.get("schema") == "fuseopt.generate/1", "the generate file names its schema fuseopt.generate/1")
            expect(data.get("generate", {}).get("kv_cache") == "held", "the generate file says the cache was held")
            problems = validate(schemas["fuseopt.generate/1"], data, ["generate.step_ms[]"])
            expect(not problems, "fuserun --generate --json matches the documented schema"
                   + ("" if not problems else ": " + "; ".join(problems[:8])))

    # The validator itself catches what it should.
    doc = schemas["fuseopt.report/1"]
    expect(validate(doc, {"schema": "x"}, []) != [], "validator: missing always-present fields are reported")
    expect(any("not documented" in p for p in validate(doc, {"schema": "x", "bogus": 1}, [])),
           "validator: an undocumented field is reported")
    expect(any("documented as integer" in p for p in validate(doc, {"nodes_before": "3"}, [])),
           "validator: a wrong type is reported")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
