"""The transformers backend's three ways of decoding a batch, on the same recorded LLM calls, in one process.

    python benchmarks/speed/bench_engine.py [--questions 8] [--batch 8] [--methods native_rag,ircot,...]
        [--threads 2] [--repeats 2] [--out benchmarks/results/engine.md]

Each method answers the first `--questions` demo questions `--batch` at a time once (LLM call cache off, parser
OpenIE, the small budgets of `bench_methods.PARAMS`) while every call that reaches the local model is recorded: its
prompts as token ids and its decoding parameters (free or under a JSON schema). The recorded calls are then replayed
through three engines, in turn, `--repeats` times (the order rotates each repeat), and each engine's best total is
kept:

- `padded`: every prompt of a call left-padded to the longest and given to `model.generate` at once (the backend
  until December 2026);
- `lockstep`: each prompt prefilled alone, the batch decoded together from the stacked caches (`_lockstep`, prefix
  cache off);
- `lockstep+prefix`: the same with the prefix cache (`PrefixStore`, emptied before each replay).

Printed per method and engine: seconds, prompt tokens computed, the outputs equal to `padded`'s (greedy). Nothing
here asserts a time; the UTC time and load average are printed. With `--out` the table goes to that file; the rows
of methods this run does not measure are kept from it (each row names its threads), so methods can be measured in
several runs."""
import argparse, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_floor import load, now  # noqa: E402  the same time and load stamps as the other speed benchmarks
from bench_methods import PARAMS  # noqa: E402


def record(llm, calls):
    "Wrap `llm._generate` so each call's prompt token ids and parameters are appended to `calls`."
    inner = llm._generate
    def spy(messages, **kw):
        schema = kw.get("json_schema")
        texts = [llm.render(m) for m in messages]
        ids = llm.tok(texts)["input_ids"] if schema is not None else llm.tok(texts, add_special_tokens=False)["input_ids"]
        calls.append(dict(ids=ids, kw=kw))
        return inner(messages, **kw)
    llm._generate = spy
    return inner


def replay(llm, calls, engine) -> tuple[float, int, list]:
    "Seconds, prompt tokens computed and the new tokens of every row of `calls` through `engine`."
    import torch
    from transformers import LogitsProcessorList
    from megrag_kit.models import SchemaIndexes
    if llm._schemas is None: llm._schemas = SchemaIndexes(llm.tok)
    llm.prefix.max_tokens = 16384 if engine == "lockstep+prefix" else 0
    llm.prefix.clear()
    out, computed, t = [], 0, time.perf_counter()
    for c in calls:
        kw = dict(max_new_tokens=c["kw"].get("max_new_tokens", 64))
        schema = c["kw"].get("json_schema")
        if schema is None:                                 # free decoding: greedy with its stop strings, as the backend
            kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            if c["kw"].get("stop"): kw["stopping_criteria"] = llm._stop_criteria(c["kw"]["stop"])
        for s in range(0, len(c["ids"]), llm.batch_size):
            rows = c["ids"][s:s + llm.batch_size]
            if schema is not None:                         # the automaton's states are the batch's, as in the backend
                kw["logits_processor"] = LogitsProcessorList([llm._schemas.processor(schema)])
            if engine == "padded":
                enc = llm.tok.pad({"input_ids": rows}, return_tensors="pt")
                with torch.inference_mode():
                    gen = llm.model.generate(**enc, pad_token_id=llm.tok.pad_token_id, **kw)
                new = gen[:, enc["input_ids"].shape[1]:]; computed += enc["input_ids"].numel()
            else:
                new = llm._lockstep(rows, **kw)
            out += [[x for x in r.tolist() if x != llm.tok.pad_token_id] for r in new]
    dt = time.perf_counter() - t
    return dt, (computed if engine == "padded" else llm.prefix.computed), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=8); ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--methods", default="native_rag,ircot,iter_retgen,megrag,evireform,cara")
    ap.add_argument("--threads", type=int, default=None); ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from megrag_kit.core import set_threads
    th = set_threads(a.threads)
    import tempfile, torch
    from megrag_kit.data import load_dataset
    from megrag_kit.method import Resources, build_method
    lines = ["# Decoding a batch: padded, lock-step, lock-step with the prefix cache (same recorded calls)\n",
             f"started {now()}; load average {load()}; threads {th['threads']} ({th['source']}), cores {th['cores']}; "
             f"torch {torch.__version__}; demo, first {a.questions} questions, batch {a.batch}, LLM smollm2-135m "
             f"(fp32), cache off, parser OpenIE, best of {a.repeats} replays\n",
             "| method | calls | prompts | prompt tokens | engine | threads | s | prompt tokens computed "
             "| outputs as padded's | load avg | measured |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    measured = a.methods.split(",")
    if a.out and Path(a.out).exists():                        # rows of the methods not measured now are kept
        kept = [l for l in Path(a.out).read_text().splitlines()
                if l.startswith("| ") and l.split("|")[1].strip() not in measured + ["method"]]
        lines += kept
        if kept: lines.insert(1, f"rows of {', '.join(sorted({l.split('|')[1].strip() for l in kept}))} kept from "
                                 f"an earlier run of this file\n")
    ds = load_dataset("demo"); qs = ds.questions[:a.questions]
    engines = ["padded", "lockstep", "lockstep+prefix"]
    with tempfile.TemporaryDirectory() as root:
        res = Resources(ds, "smollm2-135m", "minilm", device="cpu", batch_size=a.batch, cache=False, store_root=root,
                        openie_backend="parser")
        for name in measured:
            m = build_method(name, PARAMS.get(name, {}), res)
            m.answer(qs[:1])                                     # lazy views and model loads, not recorded
            calls = []; inner = record(res.llm, calls)
            for i in range(0, len(qs), a.batch): m.answer(qs[i:i + a.batch])
            res.llm._generate = inner
            best, outs, comp = {}, {}, {}
            for rep in range(a.repeats):
                for e in engines[rep % 3:] + engines[:rep % 3]:
                    dt, c, o = replay(res.llm, calls, e)
                    best[e] = min(best.get(e, dt), dt); outs[e], comp[e] = o, c
            n_p = sum(len(c["ids"]) for c in calls); n_t = sum(len(i) for c in calls for i in c["ids"])
            for e in engines:
                same = sum(x == y for x, y in zip(outs[e], outs["padded"]))
                row = (f"| {name} | {len(calls)} | {n_p} | {n_t:,} | {e} | {th['threads']} | {best[e]:.2f} "
                       f"| {comp[e]:,} | {same}/{n_p} | {load()} | {now()} |")
                lines.append(row); print(row, flush=True)
    lines.append(f"\nlast written {now()}; load average {load()}")
    if a.out: Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__": main()
