"""Free vs schema-constrained decoding under llama.cpp and transformers on MEGRAG's node schema (one prompt).

    python benchmarks/speed/bench_llamacpp_schema.py [--tokens 100] [--out benchmarks/results/llamacpp_schema.md]

One short prompt, LLM cache off, greedy, at most `--tokens` new tokens: free decoding and decoding under
`node_schema()` (MEGRAG's per-step output: a `oneOf` of two objects with bounded-length text fields), with
`smollm2-135m@llamacpp` (GBNF grammar from the schema) and `smollm2-135m` (transformers + outlines). Prints seconds,
generated tokens and tokens/s of each and the load average. Needs the `llamacpp` extra. Nothing here asserts a time."""
import argparse, os, time
from datetime import datetime, timezone
from pathlib import Path

from megrag_kit.megrag import node_schema
from megrag_kit.models import load_llm


def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--tokens", type=int, default=100); ap.add_argument("--out", default=None)
    a = ap.parse_args()
    msgs = [[{"role": "user", "content": "Question: Who is the director of the film Titanic? Answer in JSON with the fields."}]]
    lines = [f"# Free vs schema-constrained decoding, MEGRAG node schema\n",
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; load average before {os.getloadavg()[0]:.2f}; max new tokens {a.tokens}\n",
             "| backend | decoding | seconds | generated tokens | tokens/s |", "|---|---|---|---|---|"]
    for spec in ("smollm2-135m@llamacpp", "smollm2-135m"):
        m = load_llm(spec, device="cpu", cache=False)
        m.generate(msgs, max_new_tokens=4)                                       # warm-up
        for name, kw in (("free", {}), ("node_schema()", {"json_schema": node_schema()})):
            t = time.perf_counter(); g = m.generate(msgs, max_new_tokens=a.tokens, **kw)[0]; dt = time.perf_counter() - t
            lines.append(f"| {spec} | {name} | {dt:.2f} | {g.completion_tokens} | {g.completion_tokens / dt:.1f} |"); print(lines[-1], flush=True)
    lines.append(f"\nload average after {os.getloadavg()[0]:.2f}")
    print("\n".join(lines))
    if a.out: Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__": main()
