"""Each method's predictions, traces and seconds on the first demo questions, to compare two versions of the kit.

    python benchmarks/speed/bench_outputs.py answer --out A.json [--questions 8] [--batch 8] [--threads 2]
        [--methods native_rag,ircot,iter_retgen,megrag,cara,evireform]
    python benchmarks/speed/bench_outputs.py compare A.json B.json

`answer` runs each method (the small budgets of `bench_methods.PARAMS`, LLM call cache off, parser OpenIE, a fresh
store: the first pass, view building and schema compilation included) on the first `--questions` demo questions,
`--batch` at a time, and writes per method the wall seconds, the predictions and each question's trace. Run it in a
checkout of each version (`git worktree add /tmp/old COMMIT`, then `PYTHONPATH=/tmp/old python ...`), one after the
other on an otherwise idle machine. `compare` prints, per method, the seconds of A and B and how many predictions and
traces are equal (a trace compared without its timing fields: `latency_s`, `llm_seconds`). Nothing here asserts a
time."""
import argparse, json, re, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_methods import PARAMS  # noqa: E402  the same small budgets as the other method benchmarks

TIMING = re.compile(r'"(latency_s|llm_seconds)": [0-9.eE+-]+')


def answer(a):
    from megrag_kit.core import set_threads
    set_threads(a.threads)
    import megrag_kit
    from megrag_kit.data import load_dataset
    from megrag_kit.method import Resources, build_method
    ds = load_dataset("demo"); qs = ds.questions[:a.questions]
    out = {"kit": str(Path(megrag_kit.__file__).parent), "questions": len(qs), "batch": a.batch, "methods": {}}
    with tempfile.TemporaryDirectory() as root:
        res = Resources(ds, "smollm2-135m", "minilm", device="cpu", batch_size=a.batch, cache=False, store_root=root,
                        openie_backend="parser")
        for name in a.methods.split(","):
            m = build_method(name, PARAMS.get(name, {}), res)
            t = time.perf_counter()
            rows = [r for i in range(0, len(qs), a.batch) for r in m.answer(qs[i:i + a.batch])]
            s = time.perf_counter() - t
            out["methods"][name] = dict(s=s, predictions=[r.prediction for r in rows],
                                        traces=[json.dumps(getattr(r, "trace", None), sort_keys=True, default=str)
                                                for r in rows])
            print(f"{name:12s} {s:7.1f} s for {len(qs)} questions", flush=True)
    Path(a.out).write_text(json.dumps(out))


def compare(a):
    x, y = (json.loads(Path(f).read_text()) for f in (a.a, a.b))
    print(f"A: {a.a} ({x['kit']})\nB: {a.b} ({y['kit']})\n")
    print("| method | A s | B s | B / A | same predictions | same traces (but timings) |\n|---|---|---|---|---|---|")
    for name in [n for n in x["methods"] if n in y["methods"]]:
        p, q = x["methods"][name], y["methods"][name]
        same = sum(u == v for u, v in zip(p["predictions"], q["predictions"]))
        traces = sum(TIMING.sub("", u) == TIMING.sub("", v) for u, v in zip(p["traces"], q["traces"]))
        print(f"| {name} | {p['s']:.1f} | {q['s']:.1f} | {q['s'] / p['s']:.2f} | {same} of {len(p['predictions'])} "
              f"| {traces} of {len(p['traces'])} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("answer"); r.add_argument("--out", required=True)
    r.add_argument("--methods", default="native_rag,ircot,iter_retgen,megrag,cara,evireform")
    r.add_argument("--questions", type=int, default=8); r.add_argument("--batch", type=int, default=8)
    r.add_argument("--threads", type=int, default=2)
    c = sub.add_parser("compare"); c.add_argument("a"); c.add_argument("b")
    a = ap.parse_args()
    answer(a) if a.cmd == "answer" else compare(a)


if __name__ == "__main__": main()
