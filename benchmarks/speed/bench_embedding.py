"""Embedding throughput of all-MiniLM-L6-v2 in fp32 and bf16 on this machine, and how far the bf16 vectors are from fp32.

    OMP_NUM_THREADS=2 python benchmarks/speed/bench_embedding.py [--passages 1000] [--questions 100] [--out results/embedding.md]

The same 2WikiMultiHopQA passages (the first `--passages` of the corpus) are encoded with `load_embedder('minilm')`
and `load_embedder('minilm@bf16')` one after the other in this process (each after a warm-up batch), batch 64.
Printed: passages/s of each; the cosine between the fp32 and bf16 vector of each passage (mean, 1st percentile,
minimum); and, for the first `--questions` questions searched over these passages, the overlap of the two top-10
lists and how often the top-1 is the same. Nothing here asserts a time."""
import argparse, os, time
from pathlib import Path

import numpy as np
import torch

from megrag_kit.data import load_dataset
from megrag_kit.models import load_embedder


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", type=int, default=1000); ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--dataset", default="2wikimultihopqa"); ap.add_argument("--out", default=None)
    a = ap.parse_args()
    lines = []
    def say(s=""): print(s, flush=True); lines.append(s)
    ds = load_dataset(a.dataset)
    texts = [p.content for p in ds.corpus[:a.passages]]
    qs = [q.question for q in ds.questions[:a.questions]]
    say("# Embedding: fp32 vs bf16 (all-MiniLM-L6-v2, CPU)\n")
    say(f"dataset={ds.name} passages={len(texts)} questions={len(qs)} torch_threads={torch.get_num_threads()} cores={os.cpu_count()} "
        f"load average before: {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    vecs, qvecs, rows = {}, {}, []
    for spec in ("minilm", "minilm@bf16"):
        emb = load_embedder(spec, "cpu")
        emb.encode(texts[:64])
        t = time.perf_counter(); vecs[spec] = emb.encode(texts, batch_size=64); dt = time.perf_counter() - t
        qvecs[spec] = emb.encode(qs)
        rows.append((spec, emb.model_id, len(texts) / dt, dt))
        say(f"{spec}: {len(texts) / dt:7.1f} passages/s ({dt:.1f} s for {len(texts)})")
    cos = (vecs["minilm"] * vecs["minilm@bf16"]).sum(1)
    top = {s: np.argsort(-(qvecs[s] @ vecs[s].T), axis=1)[:, :10] for s in vecs}
    overlap = np.mean([len(set(x) & set(y)) / 10 for x, y in zip(top["minilm"], top["minilm@bf16"])])
    top1 = np.mean(top["minilm"][:, 0] == top["minilm@bf16"][:, 0])
    say("\n| embedder | model_id | passages/s | seconds |")
    say("|---|---|---|---|")
    for spec, mid, pps, dt in rows: say(f"| {spec} | {mid} | {pps:.1f} | {dt:.1f} |")
    say(f"\nbf16 vs fp32, per passage cosine: mean {cos.mean():.5f}, 1st percentile {np.percentile(cos, 1):.5f}, min {cos.min():.5f}")
    say(f"top-10 over these {len(texts)} passages, {len(qs)} questions: overlap {100 * overlap:.1f}%, same top-1 {100 * top1:.1f}%")
    say(f"speed-up bf16/fp32: {rows[1][2] / rows[0][2]:.2f}x; load average after: {os.getloadavg()[0]:.2f}")
    if a.out: Path(a.out).parent.mkdir(parents=True, exist_ok=True); Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__": main()
