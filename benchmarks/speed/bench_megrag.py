"""MEGRAG throughput: questions/minute with questions run one at a time vs in lock-step batches.

    python benchmarks/speed/bench_megrag.py [--device auto] [--dataset demo] [--questions 8] [--batch 8] [--variant full]

The same questions run twice with the LLM call cache off: once with `batch_size=1` (each question's loop alone,
one prompt per forward pass) and once in lock-step batches of `--batch` (each step's sufficiency and node calls
of all active questions in one forward pass). The triple view of the retrieved passages is extracted before
timing, so both runs measure the policy loop, not OpenIE. Prints questions/minute, LLM calls and tokens per
question, and whether the two runs gave the same answers (greedy decoding: padding can flip a near-tie).
Nothing here asserts a time."""
import argparse, os, time
from megrag_kit.core import resolve_device
from megrag_kit.data import load_dataset
from megrag_kit.method import Resources, build_method


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="auto"); ap.add_argument("--dataset", default="demo")
    ap.add_argument("--questions", type=int, default=8); ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--variant", default="full"); ap.add_argument("--budget", type=int, default=4)
    a = ap.parse_args()
    device = resolve_device(a.device)
    ds = load_dataset(a.dataset); qs = ds.questions[:a.questions]
    print(f"device={device} dataset={ds.name} questions={len(qs)} variant={a.variant} budget={a.budget} cores={os.cpu_count()}")
    res = Resources(ds, "smollm2-135m", "minilm", device=device, batch_size=a.batch, cache=False)
    store = res.store
    store.extract_triples([p for h in store.search([q.question for q in qs], 10) for p, _ in h])   # OpenIE outside the timing
    answers = {}
    for bs in (1, a.batch):
        res.llm.batch_size = bs
        m = build_method("megrag", dict(budget=a.budget, variant=a.variant), res)
        t = time.perf_counter()
        rows = [r for b in range(0, len(qs), bs) for r in m.answer(qs[b:b + bs])]
        dt = time.perf_counter() - t
        answers[bs] = [r.prediction for r in rows]
        calls = sum(r.cost.llm_calls for r in rows) / len(rows); toks = sum(r.cost.tokens for r in rows) / len(rows)
        steps = sum(r.fields["steps"] for r in rows) / len(rows)
        print(f"batch {bs:3d}: {60 * len(qs) / dt:6.2f} questions/minute  ({dt / len(qs):5.1f} s/question, {steps:.2f} steps, "
              f"{calls:.1f} LLM calls, {toks:.0f} tokens per question)")
    same = sum(x == y for x, y in zip(answers[1], answers[a.batch]))
    print(f"same prediction at batch 1 and batch {a.batch}: {same}/{len(qs)}")


if __name__ == "__main__": main()
