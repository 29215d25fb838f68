"""Constrained decoding's fixed costs: compiling a JSON schema, keeping its index on disk, and masking the logits.

    python benchmarks/speed/bench_schema.py [--steps 200] [--batch 4] [--out benchmarks/results/schema.md]

Over SmolLM2-135M-Instruct's tokenizer (49,152 tokens), for MEGRAG's node schema, its single-policy schema and a node
schema carrying a comparison question's two options:

- compile: `SchemaIndexes` building the `outlines_core.Index` (the regular expression outlines derives from the
  schema, walked over the vocabulary); the index's size pickled; writing it; loading it back (the file was just
  written, so it is read from the page cache: a cold disk adds its read time);
- the first masked step of a new process, each in its own fresh Python process: outlines' `OutlinesCoreLogitsProcessor`,
  whose kernel `torch.compile` builds on first use (with an empty `TORCHINDUCTOR_CACHE_DIR`, then again with the
  kernel in it), against the kit's `SchemaLogitsProcessor` (NumPy); then the mean of `--steps` further steps for a
  batch of `--batch` rows (the same process, random logits, each row walking the same valid JSON document).

Nothing here asserts a time; the UTC time and load average are printed, and with `--out` written."""
import argparse, json, os, pickle, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_floor import load, now  # noqa: E402  the same time and load stamps as the other speed benchmarks

STEP = r'''
import json, sys, time, torch
t0 = time.perf_counter()
from megrag_kit.models import SchemaIndexes, SchemaLogitsProcessor
from megrag_kit.models_hf import smollm2_path
from megrag_kit.megrag_policy import node_schema
from transformers import AutoTokenizer
from outlines.backends.outlines_core import OutlinesCoreLogitsProcessor
kind, steps, batch, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
tok = AutoTokenizer.from_pretrained(smollm2_path())
index = SchemaIndexes(tok, folder).index(node_schema(True))              # from the folder the parent filled
proc = SchemaLogitsProcessor(index) if kind == "kit" else OutlinesCoreLogitsProcessor(index, "torch")
doc = tok('{"intermediate_answer": "x", "resolved_path": "x", "stop": false, "answer": "", "missing": "x", '
          '"next_query": "x", "relation": "x"}', add_special_tokens=False)["input_ids"]
ids, g = torch.zeros((batch, 1), dtype=torch.long), torch.Generator().manual_seed(0)
logits = [torch.randn((batch, 49152), generator=g) for _ in range(8)]
t = time.perf_counter(); proc(ids, logits[0].clone()); first = time.perf_counter() - t
times, pos = [], 0
for s in range(steps):
    if pos == len(doc): proc.reset(); ids, pos = ids[:, :1], 0; proc(ids, logits[0].clone())   # the next document
    ids, pos = torch.cat([ids, torch.full((batch, 1), doc[pos])], 1), pos + 1
    x = logits[s % 8].clone(); t = time.perf_counter(); proc(ids, x); times.append(time.perf_counter() - t)
print(json.dumps({"first_s": first, "step_ms": 1000 * sum(times) / len(times)}))
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--out")
    a = ap.parse_args()
    from transformers import AutoTokenizer
    from megrag_kit.megrag_policy import node_schema, single_schema
    from megrag_kit.models import SchemaIndexes
    from megrag_kit.models_hf import smollm2_path
    cache = tempfile.mkdtemp(prefix="bench-schema-")
    tok = AutoTokenizer.from_pretrained(smollm2_path())
    started, load0 = now(), load()
    lines = [f"# Constrained decoding's fixed costs (SmolLM2-135M's tokenizer, {len(tok):,} tokens)", "",
             f"started {started}; load average {load0}; "
             f"`python benchmarks/speed/bench_schema.py --steps {a.steps} --batch {a.batch}`", "",
             "| schema | compile s | index MB | write s | load s |", "|---|---|---|---|---|"]
    schemas = {"MEGRAG node": node_schema(True), "MEGRAG single policy": single_schema(),
               "MEGRAG node, two options": node_schema(True, ["Paris", "London"])}
    folder = Path(cache) / "schemas"
    for name, schema in schemas.items():
        ix = SchemaIndexes(tok, folder)
        t = time.perf_counter(); index = ix.index(schema); compile_s = time.perf_counter() - t
        blob = pickle.dumps(index); f = folder / f"{ix.key(schema)}.pkl"
        t = time.perf_counter(); f.write_bytes(blob); write_s = time.perf_counter() - t
        again = SchemaIndexes(tok, folder)
        t = time.perf_counter(); again.index(schema); load_s = time.perf_counter() - t
        assert again.loaded == 1 and again.compiled == 0
        lines.append(f"| {name} | {compile_s:.2f} | {len(blob) / 1e6:.0f} | {write_s:.2f} | {load_s:.2f} |")
        print(lines[-1], flush=True)
    lines += ["", f"First masked step in a new process and the mean of {a.steps} more, "
              f"batch {a.batch}, the MEGRAG node schema's index loaded from disk:", "",
              "| processor | first step s | later steps ms | load before |", "|---|---|---|---|"]
    inductor = tempfile.mkdtemp(prefix="inductor-")
    for kind, label in (("outlines", "outlines' `OutlinesCoreLogitsProcessor` (`torch.compile`d kernel), cache empty"),
                        ("outlines", "the same, again: its compiled kernel now in the `torch.compile` cache"),
                        ("kit", "the kit's `SchemaLogitsProcessor` (NumPy)")):
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=inductor)
        before = load()
        r = subprocess.run([sys.executable, "-c", STEP, kind, str(a.steps), str(a.batch), str(folder)], env=env,
                           capture_output=True, text=True)
        if r.returncode: sys.exit(f"{kind}: {r.stderr[-2000:]}")
        res = json.loads(r.stdout.strip().splitlines()[-1])
        lines.append(f"| {label} | {res['first_s']:.2f} | {res['step_ms']:.3f} | {before} |")
        print(lines[-1], flush=True)
    lines += ["", f"last written {now()}; load average {load()}"]
    text = "\n".join(lines) + "\n"
    if a.out: Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
