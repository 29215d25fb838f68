"""Parser OpenIE (`EvidenceStore(openie_backend='parser')`) against the 135M LLM OpenIE, on yield and speed, over the same passages.

    OMP_NUM_THREADS=2 python benchmarks/speed/bench_openie_parser.py [--llm-triples PATH] [--out results/openie_parser.md]

The LLM side is the kit's own triple file of SmolLM2-135M (free decoding, `parse_triples`) in the 2Wiki evidence
store (`~/.cache/megrag_kit/stores/2wikimultihopqa-*/triples/smollm2-135m-instruct-q4_1.jsonl` unless `--llm-triples`):
the passages the lazy OpenIE of earlier MEGRAG runs reached, which `megrag-kit run megrag --dataset 2wikimultihopqa
--limit 20` (or `megrag-kit index --views triple`) fills. The parser (`ParserOpenIE`, spaCy en_core_web_sm + the kit's
dependency rules) and, when installed, textacy's subject-verb-object triples run over exactly those passages here.
Printed for each: triples per passage, passages with none or failed, triples per passage where there are any, and
seconds per passage (the parser timed here; the LLM's speed is `bench_generation.py`'s). The eager parser pass
over the whole corpus is projected from the measured seconds per passage. Nothing here asserts a time."""
import argparse, json, os, time
from pathlib import Path

from megrag_kit.core import cache_dir
from megrag_kit.data import load_dataset
from megrag_kit.index import ParserOpenIE, is_grounded


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="2wikimultihopqa"); ap.add_argument("--llm-triples", default=None)
    ap.add_argument("--out", default=None); ap.add_argument("--examples", type=int, default=3)
    a = ap.parse_args()
    lines = []
    def say(s=""): print(s, flush=True); lines.append(s)
    ds = load_dataset(a.dataset)
    path = Path(a.llm_triples) if a.llm_triples else next(iter(sorted(cache_dir("stores").glob(f"{a.dataset}-{ds.fingerprint()}/triples/smollm2-135m-instruct-q4_1.jsonl"))), None)
    if path is None or not path.exists(): raise SystemExit(f"no LLM triple file for {ds.name}: run `megrag-kit run megrag --dataset {ds.name} --limit 20` first, or pass --llm-triples")
    llm = {}
    for line in path.read_text().splitlines():
        r = json.loads(line); llm[r["pid"]] = (r["triples"], r.get("error"))
    pids = sorted(llm)
    texts = [ds.corpus[p].content for p in pids]
    say("# OpenIE yield: dependency parser vs the 135M LLM\n")
    say(f"dataset={ds.name} corpus={len(ds.corpus)}; {len(pids)} passages: those in the LLM triple file {path.name}; "
        f"load average before: {os.getloadavg()[0]:.2f}\n")
    pie = ParserOpenIE()
    pie.extract(texts[:8])                                         # warm-up
    t = time.perf_counter(); parsed = pie.extract(texts); dt = time.perf_counter() - t
    rows = [("LLM OpenIE, SmolLM2-135M, free decoding (kit default)", [x for x, _ in (llm[p] for p in pids)], sum(bool(llm[p][1]) for p in pids), None),
            (f"parser OpenIE ({pie.model_id})", parsed, sum(not x for x in parsed), dt / len(pids))]
    try:
        import textacy.extract as te
        t = time.perf_counter()
        docs = list(pie.nlp.pipe(texts))
        svo = [[(" ".join(w.text for w in s), " ".join(w.text for w in v), " ".join(w.text for w in o)) for s, v, o in te.subject_verb_object_triples(d)] for d in docs]
        rows.append(("textacy subject_verb_object_triples (same parse)", svo, sum(not x for x in svo), (time.perf_counter() - t) / len(pids)))
    except ImportError: say("(textacy not installed: its row is skipped)")
    say("| extractor | triples/passage | passages with none or failed | triples/passage where any | grounded triples | s/passage | eager pass over the corpus |")
    say("|---|---|---|---|---|---|---|")
    for name, items, none, sp in rows:
        n = sum(map(len, items)); anyp = [len(x) for x in items if x]
        grounded = sum(is_grounded(tr, tx) for its, tx in zip(items, texts) for tr in its)
        say(f"| {name} | {n / len(pids):.2f} | {none}/{len(pids)} ({100 * none / len(pids):.0f}%) | {sum(anyp) / max(1, len(anyp)):.2f} | "
            f"{100 * grounded / max(1, n):.0f}% | {'-' if sp is None else f'{sp:.3f}'} | {'-' if sp is None else f'{sp * len(ds.corpus) / 60:.1f} min'} |")
    both = sum(bool(llm[p][0]) and bool(x) for p, x in zip(pids, parsed))
    either = sum(bool(llm[p][0]) or bool(x) for p, x in zip(pids, parsed))
    say(f"\npassages with triples from both: {both}; from at least one: {either}/{len(pids)}")
    say(f"parser: {len(pids) / dt:.1f} passages/s; load average after: {os.getloadavg()[0]:.2f}\n")
    say("Examples (LLM | parser), the first passages where the LLM found none:")
    for p, x in [(p, x) for p, x in zip(pids, parsed) if not llm[p][0]][:a.examples]:
        say(f"- p{p} {ds.corpus[p].title!r}: LLM {llm[p][1]!r} | parser {x[:4]}")
    if a.out: Path(a.out).parent.mkdir(parents=True, exist_ok=True); Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__": main()
