"""Seconds per question of each method beside this machine's floor for the same LLM work.

    python benchmarks/speed/bench_floor.py [--questions 4] [--methods native_rag,ircot,iter_retgen,megrag,evireform,cara]
        [--threads 2] [--llm smollm2-135m] [--batch 1[,8]] [--module-tree] [--out benchmarks/results/floor.md]

The machine is measured first, in this process and at these threads: the peak matrix-multiply rate in fp32 and in
bf16 (the best of several square products, FLOP/s) and the memory read rate (the best of several sums over a 1 GiB
tensor, bytes/s). Then each method answers the first `--questions` demo questions `--batch` at a time (default 1:
one at a time; a list such as `1,8` measures each in turn, in the same process; LLM call cache off, parser OpenIE,
the small budgets of `bench_methods.PARAMS`; a first untimed pass fills the lazy views and loads the models), and
its prompt and completion tokens per question give three floors for the LLM's work (N: the
LLM's parameters; B: `--batch`):

- compute floor (the issue's definition): (prompt + completion tokens) x 2N / fp32 peak;
- the same in bf16: (prompt + completion tokens) x 2N / bf16 peak (the precision `--precision bf16` runs use);
- memory floor of decoding: every decoding step reads all the weights once, completion tokens x 4N bytes / read rate
  (fp32 weights), far above the compute floor of a token on a CPU; with `--batch B` the questions of a batch decode
  in lock-step (one weight read serves B tokens), so a question's share of it is divided by B.

`machine floor` is the prefill at the fp32 peak plus each generated token at the larger of its compute and memory
floors: what a perfect engine of fp32 weights could do here. Printed per method: s/question, the LLM's share of it,
the floors and the ratio of s/question to each. Nothing here asserts a time; the UTC time and load average of every
measurement are printed. With `--out F.md` the rows go to `F.jsonl` as they are measured (a killed run keeps them;
the same command measures only the (method, batch) pairs missing, and with none missing only rewrites `F.md` from
it, the machine measured again) and `F.md` is rewritten. `--module-tree` decodes a plain Llama through the model's
module tree instead of the kit's `LlamaStep` (`HFChatModel.llama_step = False`), to compare the two."""
import argparse, json, os, sys, time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_methods import PARAMS  # noqa: E402  the same small budgets as the questions-per-minute benchmark

LINES: list[str] = []


def say(s=""):
    print(s, flush=True); LINES.append(s)


def now(): return f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"


def load(): return "/".join(f"{x:.2f}" for x in os.getloadavg())


def peak_flops(dtype, n=1536, reps=5) -> float:
    "Best FLOP/s of an n x n by n x n product in `dtype` (2n^3 operations) over `reps` timed products."
    import torch
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b                                                                     # warm-up (kernel selection)
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best


def read_rate(gib=1.0, reps=3) -> float:
    "Best bytes/s of summing a `gib` GiB fp32 tensor (each byte read once) over `reps` timed sums."
    import torch
    x = torch.ones(int(gib * 2 ** 30) // 4, dtype=torch.float32)
    x.sum()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter(); x.sum(); best = min(best, time.perf_counter() - t)
    return x.numel() * 4 / best


def llm_parameters(llm) -> int:
    """The parameters of a local LLM: its torch module's (transformers), or for CTranslate2, which holds none, those
    stored in the transformers folder it was converted from (read from the safetensors headers, nothing loaded)."""
    if hasattr(llm, "model"): return sum(p.numel() for p in llm.model.parameters())
    from math import prod
    from safetensors import safe_open
    n = 0
    for f in sorted(Path(llm.path).glob("*.safetensors")) if Path(llm.path).is_dir() else []:
        with safe_open(str(f), "pt") as st: n += sum(prod(st.get_slice(k).get_shape()) for k in st.keys())
    if not n: raise ValueError(f"cannot count the parameters of {llm.model_id}: a transformers or CTranslate2 LLM is "
                               "needed (no torch module, no safetensors folder)")
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--methods", default="native_rag,ircot,iter_retgen,megrag,evireform,cara")
    ap.add_argument("--threads", type=int, default=None); ap.add_argument("--out", default=None)
    ap.add_argument("--llm", default="smollm2-135m")
    ap.add_argument("--batch", default="1", help="questions answered together (lock-step decoding), e.g. 1,8")
    ap.add_argument("--module-tree", action="store_true",
                    help="decode through the model's module tree, not the kit's LlamaStep (to compare the two)")
    a = ap.parse_args()
    batches = [int(b) for b in a.batch.split(",")]
    from megrag_kit.core import set_threads
    th = set_threads(a.threads)
    import tempfile, torch
    from megrag_kit.data import load_dataset
    from megrag_kit.method import Resources, build_method
    from megrag_kit.models_hf import HFChatModel
    HFChatModel.llama_step = not a.module_tree
    say("# Seconds per question beside this machine's floor for the same LLM work\n")
    say(f"started {now()}; load average {load()}; threads {th['threads']} ({th['source']}), cores {th['cores']}; "
        f"torch {torch.__version__}; demo, first {a.questions} questions, batch {a.batch}, LLM {a.llm}, cache off, parser OpenIE"
        f"{'; decoding through the module tree (--module-tree)' if a.module_tree else ''}\n")
    f32, bf16, bw = peak_flops(torch.float32), peak_flops(torch.bfloat16), read_rate()
    say(f"machine: fp32 peak {f32 / 1e9:.1f} GFLOP/s, bf16 peak {bf16 / 1e9:.1f} GFLOP/s, memory read "
        f"{bw / 1e9:.1f} GB/s (load {load()})\n")
    ds = load_dataset("demo"); qs = ds.questions[:a.questions]
    log = Path(a.out).with_suffix(".jsonl") if a.out else None
    rows = [json.loads(l) for l in log.read_text().splitlines() if l.strip()] if log and log.exists() else []
    done = {(r["m"], r.get("batch", 1)) for r in rows}
    if done: say(f"resumed: {', '.join(f'{m} batch {b}' for m, b in sorted(done))} measured earlier (in {log})\n")
    with tempfile.TemporaryDirectory() as root:
        res = Resources(ds, a.llm, "minilm", device="cpu", batch_size=max(batches), cache=False, store_root=root,
                        openie_backend="parser")
        n_par = None
        for name in [n for n in a.methods.split(",") if any((n, b) not in done for b in batches)]:
            m = build_method(name, PARAMS.get(name, {}), res)
            first = [r.prediction for r in m.answer(qs)]                  # lazy views, model loads (untimed)
            if n_par is None:
                n_par = llm_parameters(res.llm)
                say(f"LLM parameters N = {n_par:,} (fp32 weights: {4 * n_par / 2**20:,.0f} MiB read per generated token)\n")
            for b in [b for b in batches if (name, b) not in done]:
                rows.append(measure(name, b, qs, res, first, n_par, f32, bf16, bw))
                if log:
                    with open(log, "a") as f: f.write(json.dumps(rows[-1]) + "\n")
                    write_md(a.out, rows)
    write_md(a.out, rows)


def measure(name, b, qs, res, first, n_par, f32, bf16, bw) -> dict:
    """One timed pass of method `name` over `qs`, `b` questions per `answer` call, and its floors (a row; `same`: the
    predictions equal to the untimed pass's `first`)."""
    from megrag_kit.method import build_method
    m = build_method(name, PARAMS.get(name, {}), res)
    store = getattr(res.llm, "prefix", None)        # a local transformers LLM's prefix cache: emptied, so no prompt of
    if store is not None: store.clear()             # the untimed pass is reused; then its counts are this pass's
    la = os.getloadavg()[0]
    t = time.perf_counter(); out = [r for i in range(0, len(qs), b) for r in m.answer(qs[i:i + b])]
    dt = (time.perf_counter() - t) / len(qs)
    p = sum(r.cost.prompt_tokens for r in out) / len(out); c = sum(r.cost.completion_tokens for r in out) / len(out)
    llm = sum(r.cost.llm_seconds for r in out) / len(out)
    fl = (p + c) * 2 * n_par / f32; fl_bf = (p + c) * 2 * n_par / bf16; mem = c * 4 * n_par / bw / b
    machine = p * 2 * n_par / f32 + c * max(2 * n_par / f32, 4 * n_par / bw / b)
    row = dict(m=name, n=len(qs), s=dt, llm_s=llm, p=p, c=c, floor=fl, floor_bf16=fl_bf, mem=mem, machine=machine,
               la=la, at=now(), batch=b, same=sum(r.prediction == f for r, f in zip(out, first)), f32=f32, bf16=bf16,
               bw=bw, N=n_par, computed=store.computed / len(out) if store is not None else None)
    say(f"{name:12s} batch {b}: {dt:6.2f} s/q (LLM {llm:5.2f} s), {p:6.0f} prompt + {c:4.0f} completion tokens/q; floors: "
        f"compute {fl:.3f} s ({dt / fl:.1f}x), bf16 {fl_bf:.3f} s ({dt / fl_bf:.1f}x), decode memory {mem:.2f} s, "
        f"machine {machine:.2f} s ({dt / machine:.1f}x), {row['same']}/{len(qs)} predictions as the untimed pass's "
        f"(load {la:.2f})" + (f"; prompt tokens computed {row['computed']:.0f}/q, the rest from the prefix cache"
                              if store is not None else ""))
    return row


def write_md(out, rows):
    "The table of all measured rows (this run's and earlier ones'), printed and, with `out`, written to it."
    table = ["| method | parameters | questions | batch | s/question | LLM s/question | prompt tokens/q | completion tokens/q "
             "| prompt tokens computed/q | compute floor s (x) | bf16 compute floor s (x) | decode memory floor s "
             "| machine floor s (x) | same predictions | load avg before | measured |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        prm = ", ".join(f"{k}={v}" for k, v in PARAMS.get(r["m"], {}).items()) or "defaults"
        table.append(f"| {r['m']} | {prm} | {r['n']} | {r.get('batch', 1)} | {r['s']:.2f} | {r['llm_s']:.2f} | {r['p']:,.0f} | {r['c']:,.0f} "
                     f"| {'-' if r.get('computed') is None else format(r['computed'], ',.0f')} | {r['floor']:.3f} ({r['s'] / r['floor']:.1f}x) | {r['floor_bf16']:.3f} ({r['s'] / r['floor_bf16']:.1f}x) "
                     f"| {r['mem']:.2f} | {r['machine']:.2f} ({r['s'] / r['machine']:.1f}x) | {r.get('same', '-')} | {r['la']:.2f} | {r['at']} |")
    publish(out, table)


def publish(out, table: list[str]):
    "Print the Markdown `table` and, with `out`, write the lines said so far, the table and the time to it."
    print("\n".join(table), flush=True)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text("\n".join(LINES) + "\n\n" + "\n".join(table) + f"\n\nlast written {now()}; load average {load()}\n")


if __name__ == "__main__": main()
