"""Questions per minute of each method with the offline model (SmolLM2-135M, MiniLM), batch 1 vs batched.

    python benchmarks/speed/bench_methods.py [--questions 4] [--batch 4] [--methods direct,native_rag,ircot,iter_retgen,megrag,evireform,cara]
        [--threads 2] [--llm smollm2-135m] [--out benchmarks/results/methods.md]

The first `--questions` demo questions, LLM call cache off, parser OpenIE (`openie_backend="parser"`, no LLM OpenIE),
small budgets (listed in PARAMS below, printed in the output). Every method runs twice in this process: one question at a
time (`batch_size=1`) and in batches of `--batch` (prompts of the batch in one forward pass). The methods' views that are
filled lazily (triples, EviReform's propositions) are filled by a first untimed pass over the same questions, so both
timed passes measure answering. Printed per method and mode: questions/minute, s/question, LLM calls and tokens
(prompt + generated) per question, and how many predictions agree between the two modes. Nothing here asserts a time;
the UTC time and load average of every measurement are printed.

With `--out F.md`, each method's two rows are appended to `F.jsonl` as soon as they are measured and `F.md` is rewritten
from it: a killed run keeps what it measured, and the same command measures only the methods missing from `F.jsonl`
(delete it to measure again)."""
import json
import argparse, os, time
from datetime import datetime, timezone
from pathlib import Path

PARAMS = {
    "direct": {},
    "native_rag": {},
    "megrag": dict(budget=2),
    "ircot": dict(max_steps=2),
    "iter_retgen": dict(iterations=2),
    "evireform": dict(pool_x=5, pool_r=3, L=1),
    "cara": dict(agents=1, t_max=3, global_k=10, show=5, neighbors_k=5, snippet_chars=100),
}
LINES: list[str] = []


def say(s=""):
    print(s, flush=True); LINES.append(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=4); ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--methods", default=",".join(PARAMS)); ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--llm", default="smollm2-135m", help="a model spec, e.g. smollm2-135m@llamacpp (the llama.cpp extra)")
    a = ap.parse_args()
    from megrag_kit.core import set_threads
    th = set_threads(a.threads)
    import tempfile
    from megrag_kit.data import load_dataset
    from megrag_kit.method import Resources, build_method
    ds = load_dataset("demo"); qs = ds.questions[:a.questions]
    say("# Questions per minute of each method, offline model, batch 1 vs batched\n")
    say(f"started {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; load average {'/'.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"threads {th['threads']} ({th['source']}), cores {th['cores']}; demo, first {len(qs)} questions; batch {a.batch}; LLM {a.llm}, cache off; parser OpenIE\n")
    log = Path(a.out).with_suffix(".jsonl") if a.out else None
    rows = [json.loads(l) for l in log.read_text().splitlines() if l.strip()] if log and log.exists() else []
    done = {r["m"] for r in rows}
    if done: say(f"resumed: {', '.join(sorted(done))} measured earlier (in {log})\n")
    with tempfile.TemporaryDirectory() as root:
        res = Resources(ds, a.llm, "minilm", device="cpu", batch_size=a.batch, cache=False, store_root=root, openie_backend="parser")
        for name in [n for n in a.methods.split(",") if n not in done]:
            params = PARAMS.get(name, {})
            m = build_method(name, params, res)
            res.llm.batch_size = a.batch
            m.answer(qs)                                                          # fills lazy views, loads models (untimed)
            preds, new = {}, []
            for bs in (1, a.batch):
                res.llm.batch_size = bs
                m = build_method(name, params, res)
                la = os.getloadavg()[0]
                t = time.perf_counter(); out = [r for b in range(0, len(qs), bs) for r in m.answer(qs[b:b + bs])]; dt = time.perf_counter() - t
                preds[bs] = [r.prediction for r in out]
                calls = sum(r.cost.llm_calls for r in out) / len(out); toks = sum(r.cost.tokens for r in out) / len(out)
                new.append(dict(m=name, bs=bs, n=len(qs), qpm=60 * len(qs) / dt, s=dt / len(qs), calls=calls, toks=toks, la=la,
                                at=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"))
                say(f"{name:12s} batch {bs}: {60 * len(qs) / dt:6.2f} q/min, {dt / len(qs):6.1f} s/q, {calls:.1f} calls/q, {toks:,.0f} tokens/q (load {la:.2f})")
            new[-1]["same"] = sum(x == y for x, y in zip(preds[1], preds[a.batch]))
            rows += new
            if log:
                with open(log, "a") as f: f.write("".join(json.dumps(r) + "\n" for r in new))
                write_md(a.out, rows)
    write_md(a.out, rows)


def write_md(out, rows):
    "The table of all measured rows (this run's and earlier ones'), printed and, with `out`, written to it."
    table = ["| method | parameters | mode | questions | questions/min | s/question | LLM calls/question | tokens/question "
             "| same prediction as batch 1 | load avg before | measured |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = ", ".join(f"{k}={v}" for k, v in PARAMS.get(r["m"], {}).items()) or "defaults"
        same = f"{r['same']}/{r['n']}" if "same" in r else "-"
        table.append(f"| {r['m']} | {p} | batch {r['bs']} | {r['n']} | {r['qpm']:.2f} | {r['s']:.1f} | {r['calls']:.1f} | {r['toks']:,.0f} "
                     f"| {same} | {r['la']:.2f} | {r['at']} |")
    print("\n".join(table), flush=True)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text("\n".join(LINES) + "\n\n" + "\n".join(table) + "\n\nlast written "
                             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; load average {'/'.join(f'{x:.2f}' for x in os.getloadavg())}\n")

if __name__ == "__main__": main()
