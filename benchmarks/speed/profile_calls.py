"""Where a method's LLM time goes on the transformers backend: each lock-step call and a profile of the answering.

    python benchmarks/speed/profile_calls.py METHOD [--questions 8] [--batch 8] [--threads 2] [--top 45]

Answers the first `--questions` demo questions with METHOD (the small budgets of `bench_methods.PARAMS`, LLM call
cache off, parser OpenIE) twice in one process: an untimed pass (views, model loads, schema compilation), then a
profiled pass. Printed: the profiled pass's seconds, each lock-step call of it (rows, prompt lengths in tokens,
decoding steps, seconds, of which prefill) and `cProfile`'s functions by cumulative time. To profile another version,
run it with `PYTHONPATH` pointing at that version's checkout. Nothing here asserts a time."""
import argparse, cProfile, io, pstats, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_methods import PARAMS  # noqa: E402  the same small budgets as the other method benchmarks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("method"); ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8); ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=45)
    a = ap.parse_args()
    from megrag_kit.core import set_threads
    set_threads(a.threads)
    from megrag_kit import models_hf
    from megrag_kit.data import load_dataset
    from megrag_kit.method import Resources, build_method
    calls, prefill = [], [0.0]
    lockstep, prefill_one = models_hf.HFChatModel._lockstep, models_hf.HFChatModel._prefill

    def timed_prefill(self, ids):
        t = time.perf_counter(); kv = prefill_one(self, ids); prefill[0] += time.perf_counter() - t; return kv

    def timed_lockstep(self, rows, **kw):
        t, p = time.perf_counter(), prefill[0]
        new = lockstep(self, rows, **kw)
        calls.append((len(rows), [len(r) for r in rows], new.shape[1], time.perf_counter() - t, prefill[0] - p,
                      "logits_processor" in kw))
        return new
    models_hf.HFChatModel._lockstep, models_hf.HFChatModel._prefill = timed_lockstep, timed_prefill
    ds = load_dataset("demo"); qs = ds.questions[:a.questions]
    with tempfile.TemporaryDirectory() as root:
        res = Resources(ds, "smollm2-135m", "minilm", device="cpu", batch_size=a.batch, cache=False, store_root=root,
                        openie_backend="parser")
        answer = lambda: [r for i in range(0, len(qs), a.batch)
                          for r in build_method(a.method, PARAMS.get(a.method, {}), res).answer(qs[i:i + a.batch])]
        answer()                                                             # untimed: views, loads, schemas
        calls.clear(); prefill[0] = 0.0; res.llm.prefix.clear()
        prof = cProfile.Profile(); t = time.perf_counter(); prof.enable(); answer(); prof.disable()
        total = time.perf_counter() - t
    print(f"{a.method}: {total:.2f} s for {len(qs)} questions ({total / len(qs):.2f} s/q); {len(calls)} lock-step "
          f"calls, {sum(c[3] for c in calls):.2f} s, of which prefill {prefill[0]:.2f} s")
    for rows, lens, steps, s, pre, schema in calls:
        print(f"  rows {rows} prompt tokens {lens} steps {steps} s {s:.2f} prefill {pre:.2f}"
              + (" (schema)" if schema else ""))
    out = io.StringIO(); pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(a.top)
    print(out.getvalue())


if __name__ == "__main__": main()
