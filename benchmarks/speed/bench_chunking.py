"""Truncation against window chunking of the dense passage index: what the embedder's input limit costs in recall.

    OMP_NUM_THREADS=1 python benchmarks/speed/bench_chunking.py [--dataset 2wikimultihopqa] [--device cpu] [--root DIR] [--out FILE]

Builds the passage index of the dataset's corpus twice with all-MiniLM-L6-v2, once with `chunking="truncate"`
(each passage cut at the model's 256 word pieces) and once with `chunking="window"` (long passages embedded as
overlapping windows, a passage scoring its best window), in a fresh store folder (`--root`, default a new
temporary folder, so the user's cache is left alone). Prints, for each: build seconds, passages over the limit,
inputs the embedder cut, vectors stored, and Recall@2 / Recall@5 of the gold passages over all questions and over
the questions one of whose gold passages is longer than the limit. Writes the same figures, with the command, to
`--out` (default `benchmarks/results/chunking.md`). Nothing here asserts a figure."""
import argparse, os, platform, shlex, sys, tempfile, time
from datetime import date
from pathlib import Path
import numpy as np
from megrag_kit.core import resolve_device
from megrag_kit.data import load_dataset
from megrag_kit.index import EvidenceStore
from megrag_kit.metrics import recall_at_k
from megrag_kit.models import load_embedder
from megrag_kit.retrievers import embedder_tokenizer, token_lengths


def mean_recall(hits, questions, k: int) -> float:
    "Mean Recall@k (0..100) of the questions' gold passages in their ranked hits."
    return 100 * float(np.mean([recall_at_k([p for p, _ in h], q.gold_pids, k) for h, q in zip(hits, questions)])) if questions else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="2wikimultihopqa"); ap.add_argument("--device", default="cpu")
    ap.add_argument("--root", default=None, help="store folder (default: a fresh temporary folder)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "chunking.md"))
    a = ap.parse_args()
    device = resolve_device(a.device)
    root = Path(a.root) if a.root else Path(tempfile.mkdtemp(prefix="bench_chunking_"))
    ds = load_dataset(a.dataset)
    emb = load_embedder("minilm", device)
    tok, limit = embedder_tokenizer(emb)
    long = token_lengths([p.content for p in ds.corpus], tok) > limit
    qs = [q for q in ds.questions if q.gold_pids]
    sub = [i for i, q in enumerate(qs) if any(long[p] for p in q.gold_pids)]
    lines = [f"dataset={ds.name} passages={len(ds.corpus)} questions={len(qs)} (gold passage over the limit: {len(sub)}) "
             f"embedder={emb.model_id} limit={limit} device={device} cores={os.cpu_count()} OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')} root={root}"]
    print(lines[0], flush=True)
    rows = []
    for chunking in ("truncate", "window"):
        store = EvidenceStore(ds, emb, root=root, chunking=chunking, show_progress=False)
        t = time.perf_counter(); store.dense.build(); build_s = time.perf_counter() - t
        m = store.dense.meta
        t = time.perf_counter(); hits = store.search([q.question for q in qs], 5); search_s = time.perf_counter() - t
        hs = [hits[i] for i in sub]; qsub = [qs[i] for i in sub]
        rows.append(dict(chunking=chunking, build_s=build_s, n_long=m["n_long"], n_truncated=m["n_truncated"], vectors=m.get("n_windows", m["n"]),
                         longest=m["longest_tokens"], search_ms=1000 * search_s / len(qs),
                         r2=mean_recall(hits, qs, 2), r5=mean_recall(hits, qs, 5), s2=mean_recall(hs, qsub, 2), s5=mean_recall(hs, qsub, 5)))
        print(rows[-1], flush=True)
    head = ("| chunking | build s | passages over limit (longest) | inputs cut by the embedder | vectors | search ms/q (batch) "
            f"| R@2 all ({len(qs)}) | R@5 all | R@2 long-gold ({len(sub)}) | R@5 long-gold |\n|---|---|---|---|---|---|---|---|---|---|")
    table = [head] + [f"| {r['chunking']} | {r['build_s']:.1f} | {r['n_long']} ({r['longest']}) | {r['n_truncated']} | {r['vectors']:,} | {r['search_ms']:.1f} "
                      f"| {r['r2']:.2f} | {r['r5']:.2f} | {r['s2']:.2f} | {r['s5']:.2f} |" for r in rows]
    print("\n".join(table))
    cmd = "OMP_NUM_THREADS=" + os.environ.get("OMP_NUM_THREADS", "") + " python " + shlex.join(["benchmarks/speed/bench_chunking.py", *sys.argv[1:]])
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(
        "# Dense passage index: truncation against window chunking\n\n"
        f"Made by `{cmd}` on {date.today().isoformat()} ({platform.machine()}, {os.cpu_count()} cores, CPU threads capped by OMP_NUM_THREADS).\n\n"
        "Recall@k: mean over questions of the fraction of its gold passages among the top k (`megrag_kit.metrics.recall_at_k`), in %. "
        "\"long-gold\": the questions one of whose gold passages is longer than the embedder's input limit. "
        "Windows: at most the limit each, 64 word pieces shared between neighbours, a passage scoring its best window. "
        "Build seconds include counting tokens and cutting windows.\n\n"
        + lines[0] + "\n\n" + "\n".join(table) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__": main()
