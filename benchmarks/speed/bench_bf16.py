"""fp32 vs bf16 on this CPU: prefill and decoding of the local LLM, passage embedding, and how many greedy answers change.

    OMP_NUM_THREADS=1 python benchmarks/speed/bench_bf16.py [--timed 8] [--agree 40] [--passages 500]
        [--modes fp32,bf16,autocast] [--out results/bf16.md]

Prompts: the kit's reader prompt (`reader_prompt`, the one native RAG, IRCoT and ITER-RETGEN answer with) for the
first questions of the 2WikiMultiHopQA dev set, each with its gold passages as context (at most 3, as the reader
shows), so every figure is on fixed, real prompts that need no index. SmolLM2-135M-Instruct (`smollm2-135m`), in one
process one after the other:

- `fp32`: the kit's default (weights and activations float32);
- `bf16`: the model cast to bfloat16 (`HFChatModel(dtype=torch.bfloat16)`);
- `autocast`: float32 weights under `torch.autocast('cpu', torch.bfloat16)` (timed only).

Every speed is per CPU second of this process (`time.process_time`: with one thread, what the work cost, whatever
else ran on the machine; the LLM lines give the wall seconds beside). For each: prefill tokens/s (one forward pass
with a KV cache over each of the first `--timed` prompts, batch 1) and decode tokens/s (32 greedy one-token steps on
that cache, at the prompt's full context length). Then the kit's own path (`HFChatModel.generate`, greedy,
`max_new_tokens=24`, batch 8, no call cache) over the first `--agree` prompts in fp32 and bf16: CPU seconds, and the
number of answers whose text differs. Embedding: all-MiniLM-L6-v2 (`minilm`, `minilm@bf16`) over the first
`--passages` passages of the corpus, batch 64: passages per CPU second and the cosine of each bf16 vector to its fp32
one. Every comparison alternates its configurations (prompt by prompt, batch by batch) in one process, so a shared
machine's load falls on each alike; the load average is printed before and after each part. Nothing asserts a time."""
import argparse, os, time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch

from megrag_kit.data import load_dataset
from megrag_kit.models import load_embedder, load_llm
from megrag_kit.reader import reader_prompt

LINES: list[str] = []
DECODE = 32


def say(s=""):
    print(s, flush=True); LINES.append(s)


def load() -> str: return f"{os.getloadavg()[0]:.2f}"


def clock() -> tuple[float, float]:
    "`(CPU seconds of this process, wall seconds)`: with one thread the CPU time is what the work cost, whatever ran beside."
    return time.process_time(), time.perf_counter()


def since(t) -> tuple[float, float]:
    c, w = clock(); return c - t[0], w - t[1]


def prompts(ds, n):
    """Reader prompts of the first `n` questions with their gold passages (at most 3) as context and all seven worked
    examples (the reader's default when these figures were measured: long prompts, what prefill is about)."""
    by_id = {p.pid: p for p in ds.corpus}
    return [reader_prompt(q.question, [by_id[i].content for i in q.gold_pids[:3]], shots=7) for q in ds.questions[:n]]


def step_times(model, x, ctx):
    """`((prefill CPU s, wall s), (decode CPU s, wall s))` of one prompt `x` (token ids) at batch 1: one forward pass
    with a KV cache, then `DECODE` greedy one-token steps on it."""
    from transformers import DynamicCache
    with torch.inference_mode(), ctx():
        t0 = clock(); c = DynamicCache()
        o = model(torch.tensor([x]), past_key_values=c, use_cache=True); nxt = o.logits[:, -1:].argmax(-1)
        pre = since(t0); t1 = clock()
        for _ in range(DECODE):
            o = model(nxt, past_key_values=c, use_cache=True); nxt = o.logits[:, -1:].argmax(-1)
        return pre, since(t1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--timed", type=int, default=8); ap.add_argument("--agree", type=int, default=40)
    ap.add_argument("--passages", type=int, default=500); ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--modes", default="fp32,bf16,autocast"); ap.add_argument("--out", default=None)
    a = ap.parse_args()
    modes = a.modes.split(",")
    ds = load_dataset(a.dataset)
    msgs = prompts(ds, max(a.timed, a.agree))
    flags = [f for f in ("amx_bf16", "avx512_bf16") if f in open("/proc/cpuinfo").read()]
    say("# fp32 vs bf16 on this CPU (SmolLM2-135M, all-MiniLM-L6-v2)\n")
    say(f"dataset={ds.name} torch_threads={torch.get_num_threads()} cores={os.cpu_count()} cpu bf16 flags={flags} "
        f"torch={torch.__version__}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")

    say("## LLM: prefill and decoding, batch 1")
    say(f"load average before: {load()}")
    llms = {m: load_llm("smollm2-135m", "cpu", cache=False, batch_size=8,
                        dtype=torch.bfloat16 if m == "bf16" else torch.float32) for m in ("fp32", "bf16")}
    ctxs = {m: (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if m == "autocast" else nullcontext for m in modes}
    model_of = lambda m: llms["bf16" if m == "bf16" else "fp32"].model
    tok = llms["fp32"].tok
    ids = [tok(llms["fp32"].render(m), add_special_tokens=False)["input_ids"] for m in msgs[:a.timed]]
    for m in modes: step_times(model_of(m), ids[0][:64], ctxs[m])                     # warm-up
    pre, dec = {m: np.zeros(2) for m in modes}, {m: np.zeros(2) for m in modes}
    for x in ids:                      # the modes alternate prompt by prompt: the same load falls on each
        for m in modes:
            p_, d_ = step_times(model_of(m), x, ctxs[m]); pre[m] += p_; dec[m] += d_
    pt, dt = sum(map(len, ids)), DECODE * len(ids)
    rows = [(m, pt / pre[m][0], dt / dec[m][0]) for m in modes]
    say("  (tokens per CPU second of this one-thread process; wall seconds in brackets)")
    for m, p_, d_ in rows:
        say(f"  {m:8s}: prefill {p_:7.1f} tokens/CPU s ({pt} tokens, {pre[m][0]:.1f} CPU s, {pre[m][1]:.1f} wall s); "
            f"decode {d_:5.1f} tokens/CPU s ({dt} tokens, {dec[m][0]:.1f} CPU s, {dec[m][1]:.1f} wall s)")
    say(f"load average after the timed part: {load()}")
    gens = {"fp32": [], "bf16": [], "fp32_s": 0.0, "bf16_s": 0.0}
    for b in range(0, a.agree, 8):     # the kit's path, batch by batch, alternating
        for m in ("fp32", "bf16"):
            t0 = clock(); gens[m] += llms[m].generate(msgs[b:min(b + 8, a.agree)], max_new_tokens=24)
            gens[m + "_s"] += since(t0)[0]
    del llms
    base = dict((r[0], r) for r in rows).get("fp32")
    say("\n| mode | prefill tokens/CPU s | decode tokens/CPU s | prefill speed-up | decode speed-up |")
    say("|---|---|---|---|---|")
    for mode, p, d in rows:
        say(f"| {mode} | {p:.1f} | {d:.1f} | {p / base[1]:.2f}x | {d / base[2]:.2f}x |" if base else f"| {mode} | {p:.1f} | {d:.1f} | | |")
    if gens["fp32"]:
        n = len(gens["fp32"]); diff = [i for i in range(n) if gens["fp32"][i].text != gens["bf16"][i].text]
        say(f"\nkit path (HFChatModel.generate, greedy, max_new_tokens=24, batch 8, {n} prompts): fp32 {gens['fp32_s']:.1f} CPU s, "
            f"bf16 {gens['bf16_s']:.1f} CPU s ({gens['fp32_s'] / gens['bf16_s']:.2f}x); answers that differ: {len(diff)} of {n}")
        for i in diff[:8]: say(f"  q{i}: fp32 {gens['fp32'][i].text!r} | bf16 {gens['bf16'][i].text!r}")

    if a.passages:
        say(f"\n## Embedding, batch 64, first {a.passages} passages of the corpus")
        say(f"load average before: {load()}")
        texts = [p.content for p in ds.corpus[:a.passages]]
        embs = {spec: load_embedder(spec, "cpu") for spec in ("minilm", "minilm@bf16")}
        vecs, secs = {s_: [] for s_ in embs}, {s_: 0.0 for s_ in embs}
        for s_, e in embs.items(): e.encode(texts[:64])                                  # warm-up
        for b in range(0, len(texts), 64):  # alternating batch by batch
            for s_, e in embs.items():
                t0 = clock(); vecs[s_].append(e.encode(texts[b:b + 64], batch_size=64))
                secs[s_] += since(t0)[0]
        vecs = {s_: np.concatenate(v) for s_, v in vecs.items()}
        eb = [len(texts) / secs[s_] for s_ in embs]
        for s_, e in embs.items():
            say(f"  {s_:12s}: {len(texts) / secs[s_]:6.1f} passages/CPU s ({secs[s_]:.1f} CPU s), model_id {e.model_id}")
        cos = (vecs["minilm"] * vecs["minilm@bf16"]).sum(1)
        say(f"  bf16 speed-up {eb[1] / eb[0]:.2f}x; cosine bf16 vs fp32 per passage: mean {cos.mean():.5f}, min {cos.min():.5f}")
    say(f"\nload average after: {load()}")
    if a.out: Path(a.out).parent.mkdir(parents=True, exist_ok=True); Path(a.out).write_text("\n".join(LINES) + "\n")


if __name__ == "__main__": main()
