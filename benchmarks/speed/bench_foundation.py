"""Foundation benchmarks: print throughput, latency and memory figures on this machine.

    python benchmarks/speed/bench_foundation.py [--device auto] [--skip-main-job]

Figures: embedding passages/s (2Wiki corpus, or the demo without shared/), OpenIE generated tokens/s at batch 1
and batched, dense query latency (faiss, whole corpus), peak resident memory, and the wall time of the main job
(`megrag-kit run native_rag --limit 20`, LLM cache off). Nothing here asserts a time."""
import argparse, json, os, resource, subprocess, sys, tempfile, time
from pathlib import Path
from megrag_kit.core import resolve_device
from megrag_kit.data import load_dataset
from megrag_kit.models import load_llm, load_embedder
from megrag_kit.index import EvidenceStore, openie_prompt, TRIPLE_SCHEMA


def peak_mb() -> float: return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="auto"); ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--passages", type=int, default=2000); ap.add_argument("--skip-main-job", action="store_true")
    a = ap.parse_args()
    device = resolve_device(a.device)
    try: ds = load_dataset(a.dataset)
    except Exception: ds = load_dataset("demo")
    print(f"device={device} dataset={ds.name} passages={len(ds.corpus)} cores={os.cpu_count()}")
    emb = load_embedder("minilm", device)
    texts = [p.content for p in ds.corpus[:a.passages]]
    emb.encode(texts[:64]); t = time.perf_counter(); emb.encode(texts); dt = time.perf_counter() - t
    print(f"embedding: {len(texts) / dt:8.1f} passages/s  ({len(texts)} passages, all-MiniLM-L6-v2)")

    store = EvidenceStore(ds, emb, root=tempfile.mkdtemp(), show_progress=False)
    t = time.perf_counter(); store.dense.build(); print(f"index build (embed + faiss): {time.perf_counter() - t:6.1f} s for {len(ds.corpus)} passages")
    qs = [q.question for q in ds.questions[:100]]
    t = time.perf_counter()
    for q in qs: store.search([q], 10)
    print(f"dense query latency (encode + faiss top-10, one at a time): {1000 * (time.perf_counter() - t) / len(qs):6.1f} ms/query")
    t = time.perf_counter(); store.search(qs, 10); print(f"dense query latency (batch of {len(qs)}): {1000 * (time.perf_counter() - t) / len(qs):6.1f} ms/query")

    llm = load_llm("smollm2-135m", device, cache=False, batch_size=8)
    prompts = [openie_prompt(p.content) for p in ds.corpus[:8]]
    for bs in (1, 8):
        llm.batch_size = bs
        t = time.perf_counter(); gens = llm.generate(prompts, max_new_tokens=320, json_schema=TRIPLE_SCHEMA); dt = time.perf_counter() - t
        toks = sum(g.completion_tokens for g in gens)
        print(f"OpenIE (schema-constrained) batch {bs}: {toks / dt:7.1f} generated tokens/s, {dt / len(prompts):5.2f} s/passage")
        t = time.perf_counter(); gens = llm.generate(prompts, max_new_tokens=320); dt = time.perf_counter() - t
        print(f"OpenIE (free decoding)      batch {bs}: {sum(g.completion_tokens for g in gens) / dt:7.1f} generated tokens/s")
    print(f"peak resident memory: {peak_mb():.0f} MB")

    if not a.skip_main_job:
        out = tempfile.mkdtemp()
        cmd = [str(Path(sys.executable).parent / "megrag-kit"), "run", "native_rag", "--dataset", ds.name, "--limit", "20", "--out", out,
               "--device", device, "--no-cache"]
        t = time.perf_counter(); subprocess.run(cmd, check=True, capture_output=True); dt = time.perf_counter() - t
        s = json.loads((Path(out) / "summary.json").read_text())
        print(f"main job (native_rag, --limit 20, no cache, process start included): {dt:6.1f} s; F1 {s['f1']:.1f}")


if __name__ == "__main__": main()
