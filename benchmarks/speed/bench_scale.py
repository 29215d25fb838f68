"""How the dense index grows with the corpus: a deterministic synthetic corpus of 1k, 10k and 100k short passages.

    nice -n 10 python benchmarks/speed/bench_scale.py [--sizes 1000,10000,100000] [--embedder minilm] [--queries 200] [--threads 2]
        [--rows benchmarks/results/scale.jsonl] [--out benchmarks/results/scale.md]
    python benchmarks/speed/bench_scale.py --report-only            # rewrite scale.md and scale.png from the rows measured so far

The corpus (`synthetic_corpus(n, seed=0)`) is templated sentences over invented people, places and organisations:
2-3 sentences, about 30 words per passage, the same texts for the same `n` and seed on every machine. The questions
(`synthetic_queries`) ask about random people of the corpus ("Where was <name> born?").

Each size runs in its own process (so its peak memory is its own) and appends one JSON row to `--rows`:

- `DenseIndex(texts, embedder, index_type="flat").build()` as the kit does it (embed in batches of 256 streamed to
  `passages.vectors.npy`, then faiss filled from that file): build seconds, passages/s, and the process's peak RSS
  (VmHWM) before and after the build;
- the vector handling alone, from the saved vectors (no embedding), both ways, each with the peak RSS reset first
  (`/proc/self/clear_refs`): the old path (batches kept in a list, concatenated, added to `IndexFlatIP`) and the
  streamed path (chunks read from the file into `IndexFlatIP`); peak growth over the RSS before, in MB;
- HNSW (`index_type="hnsw"`, M 32, efSearch 64) and IVF (`index_type="ivf"`, nlist 4 sqrt(n), nprobe 16) built from the
  same vectors (the embedder is replaced by a lookup of the saved rows, so their build time is faiss's alone);
- query latency of the faiss search alone (the questions' vectors encoded once): one query at a time and a batch,
  ms/query, for flat, HNSW and IVF; Recall@10 of HNSW and IVF against flat's top 10.

`--report-only` (and every run at its end) writes a markdown table and a plot of build time and peak memory against
corpus size (log-log) from the latest row of each size. Nothing here asserts a time; each row records the load average
and the UTC time it was measured at."""
import argparse, json, os, random, resource, subprocess, sys, tempfile, time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]          # benchmarks/
ROOT = HERE.parent

FIRST = ["Ala", "Bren", "Cor", "Dag", "Eli", "Fen", "Gor", "Hal", "Isa", "Jor", "Kel", "Lun", "Mar", "Nor", "Osk", "Pel",
         "Quin", "Ros", "Sev", "Tam", "Ulf", "Vin", "Wen", "Xan", "Yor", "Zel"]
MID = ["", "a", "an", "e", "en", "i", "o", "or", "u", "y", "is", "et"]
LAST = ["dale", "ford", "wick", "ton", "mere", "berg", "holm", "stein", "ley", "worth", "ridge", "vale", "by", "court",
        "field", "haven", "more", "sby", "thorpe", "well"]
JOBS = ["painter", "chemist", "footballer", "architect", "novelist", "composer", "judge", "sailor", "botanist", "actor",
        "engineer", "historian", "physician", "bishop", "poet", "general", "astronomer", "violinist", "banker", "sculptor"]
ORGS = ["Academy", "Company", "Institute", "Orchestra", "Museum", "University", "Society", "Theatre", "Bank", "Observatory"]
TEMPLATES = [
    "{p} was a {job} born in {c1} in {y1}.",
    "{p} studied at the {c2} {org} and later taught there.",
    "In {y2}, {p} moved to {c3}, where {pr} married {q}.",
    "{p} is known for work on the {c1} {org}, finished in {y2}.",
    "The {job} {q} was a close friend of {p} in {c2}.",
    "{p} died in {c3} in {y3} and was buried near {c1}.",
]


def _name(rng, parts=2):
    return " ".join(rng.choice(FIRST) + rng.choice(MID) + rng.choice(LAST) if i else rng.choice(FIRST) + rng.choice(MID)
                    for i in range(parts))


def synthetic_corpus(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """`(texts, people)`: `n` passages of 2-3 templated sentences (about 30 words), the same for the same `n` and `seed`;
    `people[i]` is the person passage `i` is about."""
    rng = random.Random(seed)
    towns = sorted({rng.choice(FIRST) + rng.choice(LAST) for _ in range(3000)})
    texts, people = [], []
    for i in range(n):
        p, q = _name(rng), _name(rng)
        y1 = rng.randint(1600, 1990)
        f = dict(p=p, q=q, job=rng.choice(JOBS), org=rng.choice(ORGS), c1=rng.choice(towns), c2=rng.choice(towns), c3=rng.choice(towns),
                 y1=y1, y2=y1 + rng.randint(18, 40), y3=y1 + rng.randint(41, 90), pr=rng.choice(["he", "she"]))
        sents = [TEMPLATES[0]] + rng.sample(TEMPLATES[1:], rng.randint(1, 2))
        texts.append(" ".join(s.format(**f) for s in sents)); people.append(p)
    return texts, people


def synthetic_queries(people: list[str], k: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    forms = ["Where was {} born?", "What was the profession of {}?", "In which year was {} born?", "Who was a friend of {}?"]
    return [rng.choice(forms).format(rng.choice(people)) for _ in range(k)]


def rss_mb(field="VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"): return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak():
    try: Path("/proc/self/clear_refs").write_text("5")      # resets VmHWM to the current RSS (Linux >= 4.0)
    except OSError: pass


class HashBowEmbedder:
    """`--embedder hash`: no model, words and word pairs hashed (crc32) into 384 signed buckets, L2-normalized.
    Thousands of passages per second, so the index's own costs at 100k can be measured when MiniLM is too slow
    on a loaded machine; its vectors are not MiniLM's, so its Recall@10 figures are for these vectors only."""
    model_id, dim = "hash-bow-384", 384
    def encode(self, texts, batch_size=64):
        import re, zlib
        x = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            w = re.findall(r"\w+", t.lower())
            for tok in w + [a + " " + b for a, b in zip(w, w[1:])]:
                h = zlib.crc32(tok.encode()); x[i, h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


class Lookup:
    "An embedder that returns the saved vector of a corpus text (no model): builds HNSW/IVF from the same vectors."
    def __init__(self, texts, vecs, model_id, dim):
        self.row = {t: i for i, t in enumerate(texts)}; self.vecs, self.model_id, self.dim = vecs, model_id, dim
    def encode(self, texts, batch_size=64): return np.asarray(self.vecs[[self.row[t] for t in texts]], dtype=np.float32)


def one(n, a):
    "Measure one corpus size in this process; returns the row."
    from megrag_kit.core import set_threads
    set_threads(a.threads)
    import faiss
    from megrag_kit.models import load_embedder
    from megrag_kit.retrievers import DenseIndex, _npy_rows
    row = dict(n=n, embedder=a.embedder, threads=a.threads, started=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               load_before=[round(x, 2) for x in os.getloadavg()])
    t = time.perf_counter(); texts, people = synthetic_corpus(n); row["corpus_s"] = round(time.perf_counter() - t, 2)
    row["words_per_passage"] = round(sum(len(x.split()) for x in texts) / n, 1)
    queries = synthetic_queries(people, a.queries)
    emb = HashBowEmbedder() if a.embedder == "hash" else load_embedder(a.embedder, "cpu"); emb.encode(texts[:64])
    row["rss_before_build_mb"] = round(rss_mb(), 1); reset_peak()
    with tempfile.TemporaryDirectory(dir=a.tmp) as folder:
        t = time.perf_counter(); flat = DenseIndex(texts, emb, folder, show_progress=False).build(); dt = time.perf_counter() - t
        row.update(build_s=round(dt, 2), passages_per_s=round(n / dt, 1), peak_rss_build_mb=round(rss_mb("VmHWM"), 1),
                   vectors_mb=round(n * emb.dim * 4 / 2**20, 1), load_after_build=[round(x, 2) for x in os.getloadavg()])
        vf, dim = flat.vectors_path, int(emb.dim)
        # the vector handling alone, both ways, from the saved vectors
        base = rss_mb(); reset_peak()
        parts = [_npy_rows(vf, b, min(n, b + 256)) for b in range(0, n, 256)]
        x = np.concatenate(parts); ix = faiss.IndexFlatIP(dim); ix.add(x)
        row["old_path_peak_growth_mb"] = round(rss_mb("VmHWM") - base, 1)
        del parts, x, ix
        base = rss_mb(); reset_peak()
        ix = faiss.IndexFlatIP(dim)
        for b in range(0, n, 16384): ix.add(_npy_rows(vf, b, min(n, b + 16384)))
        row["streamed_peak_growth_mb"] = round(rss_mb("VmHWM") - base, 1)
        del ix
        qv = flat.encode(queries)
        vecs = np.load(vf, mmap_mode="r")
        look = Lookup(texts, vecs, emb.model_id, dim)
        idx = {"flat": flat}
        for kind in ("hnsw", "ivf"):
            t = time.perf_counter(); idx[kind] = DenseIndex(texts, look, folder, show_progress=False, index_type=kind).build()
            row[f"{kind}_build_s"] = round(time.perf_counter() - t, 2)
        row["ivf_nlist"] = idx["ivf"].meta["nlist"]
        top = {}
        for kind, d in idx.items():
            ix = d._index
            ix.search(qv[:5], 10)
            t = time.perf_counter()
            for i in range(len(qv)): ix.search(qv[i:i + 1], 10)
            row[f"{kind}_ms_one"] = round(1000 * (time.perf_counter() - t) / len(qv), 3)
            t = time.perf_counter(); _, ids = ix.search(qv, 10)
            row[f"{kind}_ms_batch"] = round(1000 * (time.perf_counter() - t) / len(qv), 3)
            top[kind] = ids
        for kind in ("hnsw", "ivf"):
            row[f"{kind}_recall10"] = round(float(np.mean([len(set(a_) & set(b_)) / 10 for a_, b_ in zip(top[kind], top["flat"])])), 4)
    row["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    row["load_after"] = [round(x, 2) for x in os.getloadavg()]
    row["finished"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return row


def report(rows_path: Path, out: Path):
    rows = {}
    for line in rows_path.read_text().splitlines():
        if line.strip(): r = json.loads(line); rows[(r["embedder"], r["n"])] = r
    rows = sorted(rows.values(), key=lambda r: (r["embedder"], r["n"]))
    L = ["# Dense index at scale: synthetic corpora of 1k, 10k and 100k passages\n",
         "Made by `benchmarks/speed/bench_scale.py` (its docstring says how); one row per corpus size, each measured in its own process,",
         "the latest measurement of each size. The machine has 2 cores and is shared: every row gives the UTC time and the load",
         "average (1/5/15 min) before its build; times are only comparable within a row or between rows of similar load.\n",
         "## Build: time and memory\n",
         "| passages | embedder | threads | words/passage | build s (embed + flat) | passages/s | vectors MB | RSS before build MB | peak RSS in build MB | vector handling, peak growth MB: old path (list + concatenate) / streamed | measured (UTC), load before / after build |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['n']:,} | {r['embedder']} | {r['threads']} | {r['words_per_passage']} | {r['build_s']:.1f} | {r['passages_per_s']:.1f} | {r['vectors_mb']} | "
                 f"{r['rss_before_build_mb']:.0f} | {r['peak_rss_build_mb']:.0f} | {r['old_path_peak_growth_mb']:.0f} / {r['streamed_peak_growth_mb']:.0f} | "
                 f"{r['started']}, {'/'.join(map(str, r['load_before']))} / {'/'.join(map(str, r['load_after_build']))} |")
    L += ["\n## Search: latency of the faiss search alone (query vectors given) and Recall@10 against flat\n",
          "| passages | flat ms/query (one / batch) | HNSW build s | HNSW ms/query (one / batch) | HNSW Recall@10 | IVF nlist | IVF build s | IVF ms/query (one / batch) | IVF Recall@10 | load after |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['n']:,} | {r['flat_ms_one']:.3f} / {r['flat_ms_batch']:.3f} | {r['hnsw_build_s']:.1f} | {r['hnsw_ms_one']:.3f} / {r['hnsw_ms_batch']:.3f} | "
                 f"{r['hnsw_recall10']:.3f} | {r['ivf_nlist']} | {r['ivf_build_s']:.1f} | {r['ivf_ms_one']:.3f} / {r['ivf_ms_batch']:.3f} | {r['ivf_recall10']:.3f} | "
                 f"{'/'.join(map(str, r['load_after']))} |")
    png = out.with_suffix(".png")
    try:
        import matplotlib; matplotlib.use("Agg")
        import matplotlib.pyplot as plt, seaborn as sns
        sns.set_theme(style="whitegrid")
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        for emb in sorted({r["embedder"] for r in rows}):
            rs = [r for r in rows if r["embedder"] == emb]; ns = [r["n"] for r in rs]
            ax[0].plot(ns, [r["build_s"] for r in rs], "o-", label=f"embed + flat ({emb})")
            ax[0].plot(ns, [r["hnsw_build_s"] for r in rs], "s--", label=f"HNSW from vectors ({emb})")
            ax[0].plot(ns, [r["ivf_build_s"] for r in rs], "^--", label=f"IVF from vectors ({emb})")
            ax[1].plot(ns, [r["peak_rss_build_mb"] for r in rs], "o-", label=f"process peak RSS, build ({emb})")
            ax[1].plot(ns, [r["old_path_peak_growth_mb"] for r in rs], "s--", label=f"vector handling, old path, peak growth ({emb})")
            ax[1].plot(ns, [r["streamed_peak_growth_mb"] for r in rs], "^--", label=f"vector handling, streamed, peak growth ({emb})")
            ax[1].plot(ns, [r["vectors_mb"] for r in rs], ":", color="grey", label=f"the vectors themselves ({emb})")
        for a_, t_ in zip(ax, ("build time (s)", "memory (MB)")):
            a_.set_xscale("log"); a_.set_yscale("log"); a_.set_xlabel("passages"); a_.set_ylabel(t_); a_.legend(fontsize=7)
        fig.suptitle("Dense index vs corpus size (synthetic corpus, bench_scale.py)", fontsize=10)
        fig.tight_layout(); fig.savefig(png, dpi=120); plt.close(fig)
        L.append(f"\nPlot: `{png.name}` (build time and memory against corpus size, log-log).")
    except ImportError as e:
        L.append(f"\n(no plot: {e})")
    out.write_text("\n".join(L) + "\n"); print("\n".join(L)); print(f"wrote {out} and {png}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000"); ap.add_argument("--embedder", default="minilm", help="minilm | minilm@bf16 | hash (no model, see HashBowEmbedder)")
    ap.add_argument("--queries", type=int, default=200); ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", default=str(HERE / "results" / "scale.jsonl")); ap.add_argument("--out", default=str(HERE / "results" / "scale.md"))
    ap.add_argument("--tmp", default=None, help="folder for the temporary index files (default: the system's)")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS); ap.add_argument("--report-only", action="store_true")
    a = ap.parse_args()
    rows, out = Path(a.rows), Path(a.out)
    if a.one is not None:
        print(json.dumps(one(a.one, a))); return
    if not a.report_only:
        rows.parent.mkdir(parents=True, exist_ok=True)
        for n in [int(x) for x in a.sizes.split(",")]:
            print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {n:,} passages, load {os.getloadavg()[0]:.2f}", flush=True)
            env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
            args = [sys.executable, __file__, "--one", str(n), "--embedder", a.embedder, "--queries", str(a.queries), "--threads", str(a.threads)]
            if a.tmp: args += ["--tmp", a.tmp]
            p = subprocess.run(args, env=env, capture_output=True, text=True)
            if p.returncode: raise SystemExit(f"size {n} failed:\n{p.stderr[-3000:]}")
            row = json.loads(p.stdout.strip().splitlines()[-1])
            print(json.dumps(row), flush=True)
            with open(rows, "a") as f: f.write(json.dumps(row) + "\n")
    report(rows, out)


if __name__ == "__main__": main()
