"""Where OpenIE generation time goes, and what each speed-up buys, on the kit's real OpenIE prompts.

    OMP_NUM_THREADS=2 python benchmarks/speed/bench_generation.py [--passages 8] [--constrained 4] [--out results/generation.md]
        [--skip bf16,prefix,batch,constrained,llamacpp]

The same passages of the 2WikiMultiHopQA corpus (evenly spaced over it, so short and long ones), the kit's few-shot
OpenIE prompt (`openie_prompt`), SmolLM2-135M-Instruct, greedy, `max_new_tokens=320`, LLM call cache off, all in one
process one after the other, so every figure below is measured side by side:

- transformers, batch 1, free decoding (the kit's default OpenIE path), split into prefill (one forward pass over
  the prompt, timed alone) and decoding (the rest of the call);
- the same with the shared few-shot prefix's KV cache computed once and copied into every call (prefix reuse);
- batch 8 in corpus order and batch 8 sorted by prompt length, with the padding waste of each: prompt positions that
  are padding, and decode steps spent on rows that had already finished;
- schema-constrained decoding (outlines, `TRIPLE_SCHEMA`) at batch 1 on the first `--constrained` passages;
- bf16 weights on CPU at batch 1;
- llama.cpp (`smollm2-135m@llamacpp`, the same GGUF; only when `llama-cpp-python` is installed), free and
  grammar-constrained, with the share of passages whose output text, and whose parsed triples, equal the
  transformers output.

For each: seconds per passage, passages/s, generated tokens/s, passages whose answer parses into grounded triples,
outputs identical to the batch-1 baseline, and the projected time of an eager OpenIE pass over the whole corpus.
Nothing here asserts a time; the machine is shared, so the load average before and after is printed too."""
import argparse, copy, os, time
from pathlib import Path

import torch

from megrag_kit.data import load_dataset
from megrag_kit.index import OPENIE_STOP, TRIPLE_SCHEMA, openie_prompt, parse_triples
from megrag_kit.models import StructuredOutputError, load_llm

MAX_NEW = 320
LINES: list[str] = []


def say(s=""):
    print(s, flush=True); LINES.append(s)


def triples_or_none(text, passage):
    try: return parse_triples(text, passage)
    except StructuredOutputError: return None


def common_prefix(seqs) -> int:
    n = min(map(len, seqs))
    for i in range(n):
        if len({s[i] for s in seqs}) > 1: return i
    return n


def run(name, fn, passages, rows, base=None):
    "Time `fn() -> list[Generation]` over the passages and add a summary row."
    t0 = time.perf_counter(); gens = fn(); dt = time.perf_counter() - t0
    n = len(gens); toks = sum(g.completion_tokens or 0 for g in gens)
    parsed = [triples_or_none(g.text, p) for g, p in zip(gens, passages)]
    same = None if base is None else sum(g.text == b.text for g, b in zip(gens, base))
    same_t = None if base is None else sum(x == triples_or_none(b.text, p) for x, b, p in zip(parsed, base, passages))
    rows.append(dict(name=name, n=n, s=dt / n, pps=n / dt, tps=toks / dt, toks=toks / n, ok=sum(x is not None for x in parsed),
                     same=same, same_t=same_t))
    say(f"  {name}: {dt / n:6.2f} s/passage, {toks / dt:6.1f} generated tokens/s, {toks / n:5.1f} tokens/passage")
    return gens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", type=int, default=8); ap.add_argument("--constrained", type=int, default=4)
    ap.add_argument("--dataset", default="2wikimultihopqa"); ap.add_argument("--skip", default="")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    ds = load_dataset(a.dataset)
    N = len(ds.corpus)
    step = max(1, N // a.passages)
    passages = [ds.corpus[i].content for i in range(0, N, step)][:a.passages]
    msgs = [openie_prompt(p) for p in passages]
    say(f"# OpenIE generation: where the time goes\n")
    say(f"dataset={ds.name} corpus={N} passages (every {step}th, {len(passages)} used) torch_threads={torch.get_num_threads()} "
        f"cores={os.cpu_count()} load average before: {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")

    llm = load_llm("smollm2-135m", "cpu", cache=False, batch_size=1)
    tok, model = llm.tok, llm.model
    texts = [llm.render(m) for m in msgs]
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    P = common_prefix(ids)
    lens = [len(x) for x in ids]
    say(f"prompt tokens: mean {sum(lens) / len(lens):.0f}, min {min(lens)}, max {max(lens)}; shared few-shot prefix {P} tokens "
        f"({100 * P * len(lens) / sum(lens):.0f}% of all prompt tokens)\n")
    rows = []
    gen = lambda ms, **kw: llm.generate(ms, max_new_tokens=MAX_NEW, stop=OPENIE_STOP, **kw)

    # 1. batch 1, prefill timed alone
    say("## transformers, fp32, batch 1")
    pre = 0.0
    with torch.inference_mode():
        model(torch.tensor([ids[0]]))                                # warm-up
        for x in ids:
            t0 = time.perf_counter(); model(torch.tensor([x])); pre += time.perf_counter() - t0
    base = run("hf fp32 batch 1 (kit default)", lambda: [gen([m])[0] for m in msgs], passages, rows)
    total = rows[-1]["s"] * len(msgs)
    dec_toks = sum(g.completion_tokens for g in base)
    say(f"  prefill {pre / len(ids):.2f} s/passage ({100 * pre / total:.0f}% of the time, {sum(lens) / pre:.0f} prompt tokens/s); "
        f"decoding {(total - pre) / len(ids):.2f} s/passage ({100 * (total - pre) / total:.0f}%, {dec_toks / (total - pre):.1f} tokens/s)")
    say(f"  the shared prefix is {100 * P / (sum(lens) / len(lens)):.0f}% of a prompt: reusing its KV cache can save at most "
        f"{100 * pre * P / sum(lens) * len(lens) / total:.0f}% of the batch-1 time\n")

    if "prefix" not in skip:
        from transformers import DynamicCache
        def with_prefix():
            with torch.inference_mode():
                pc = DynamicCache(); model(torch.tensor([ids[0][:P]]), past_key_values=pc)
                out = []
                for m, x in zip(msgs, ids):
                    o = model.generate(torch.tensor([x]), attention_mask=torch.ones(1, len(x), dtype=torch.long), past_key_values=copy.deepcopy(pc),
                                       max_new_tokens=MAX_NEW, do_sample=False, temperature=None, top_p=None, top_k=None,
                                       stop_strings=OPENIE_STOP, tokenizer=tok, pad_token_id=tok.pad_token_id)
                    new = o[0, len(x):]
                    text = tok.decode(new, skip_special_tokens=True).strip()
                    for s in OPENIE_STOP:
                        j = text.find(s); text = text[:j] if j >= 0 else text
                    from megrag_kit.models import Generation
                    out.append(Generation(text.strip(), len(x), int((new != tok.pad_token_id).sum())))
            return out
        run("hf fp32 batch 1 + shared-prefix KV reuse", with_prefix, passages, rows, base)

    if "batch" not in skip:
        say("\n## transformers, fp32, batch 8: padding waste")
        llm.batch_size = 8
        for label, order in (("corpus order", list(range(len(msgs)))), ("sorted by prompt length", sorted(range(len(msgs)), key=lambda i: lens[i]))):
            g8 = run(f"hf fp32 batch 8, {label}", lambda: gen([msgs[i] for i in order]), [passages[i] for i in order], rows, [base[i] for i in order])
            pad = gen_waste = slots = steps_all = 0
            for b in range(0, len(order), 8):
                chunk = order[b:b + 8]; L = max(lens[i] for i in chunk)
                pad += sum(L - lens[i] for i in chunk); slots += L * len(chunk)
                g = [g8[b + j].completion_tokens for j in range(len(chunk))]
                gen_waste += sum(max(g) - x for x in g); steps_all += max(g) * len(chunk)
            say(f"    padding: {100 * pad / slots:.0f}% of prompt positions; {100 * gen_waste / steps_all:.0f}% of decode row-steps spent on finished rows")
        llm.batch_size = 1

    if "constrained" not in skip and a.constrained:
        say("\n## schema-constrained decoding (outlines, TRIPLE_SCHEMA), batch 1")
        k = a.constrained
        run(f"hf fp32 batch 1, constrained (first {k})", lambda: llm.generate(msgs[:k], max_new_tokens=MAX_NEW, json_schema=TRIPLE_SCHEMA),
            passages[:k], rows)

    if "bf16" not in skip:
        say("\n## bf16 weights on CPU, batch 1")
        llm16 = load_llm("smollm2-135m", "cpu", cache=False, batch_size=1, dtype=torch.bfloat16)
        run("hf bf16 batch 1", lambda: [llm16.generate([m], max_new_tokens=MAX_NEW, stop=OPENIE_STOP)[0] for m in msgs], passages, rows, base)
        del llm16

    if "llamacpp" not in skip:
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            say("\n(llama.cpp section skipped: llama-cpp-python is not installed; pip install 'megrag_kit[llamacpp]')")
        else:
            say("\n## llama.cpp (same GGUF, Q4_1 kernels), batch 1")
            lc = load_llm("smollm2-135m@llamacpp", cache=False)
            say(f"  model_id {lc.model_id}, n_threads {lc.n_threads}")
            lc.generate(msgs[:1], max_new_tokens=8)                 # warm-up: loads the weights, fills the prefix cache
            run("llama.cpp batch 1, free", lambda: [lc.generate([m], max_new_tokens=MAX_NEW, stop=OPENIE_STOP)[0] for m in msgs], passages, rows, base)
            run("llama.cpp batch 1, grammar (TRIPLE_SCHEMA)", lambda: [lc.generate([m], max_new_tokens=MAX_NEW, json_schema=TRIPLE_SCHEMA)[0] for m in msgs],
                passages, rows)

    say(f"\n## Summary ({len(passages)} passages; eager pass over all {N:,} passages projected from s/passage)\n")
    say("| configuration | s/passage | passages/s | generated tokens/s | tokens/passage | parsed to triples | same text as batch 1 | same triples | eager 2Wiki pass |")
    say("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        same = "-" if r["same"] is None else f"{r['same']}/{r['n']}"
        same_t = "-" if r["same_t"] is None else f"{r['same_t']}/{r['n']}"
        say(f"| {r['name']} | {r['s']:.2f} | {r['pps']:.2f} | {r['tps']:.1f} | {r['toks']:.0f} | {r['ok']}/{r['n']} | {same} | {same_t} | {r['s'] * N / 3600:.1f} h |")
    say(f"\nload average after: {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text("\n".join(LINES) + "\n")


if __name__ == "__main__": main()
