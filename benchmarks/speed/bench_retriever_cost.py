"""Construction and search cost of the kit's retrievers on one small corpus, and the offline embedders' dense recall.

    OMP_NUM_THREADS=1 python benchmarks/speed/bench_retriever_cost.py [--dataset demo] [--out FILE.json]

The retrievers of EviReform's Table A.7 that the kit has, built from nothing in a temporary store folder, one after
the other in this process, with the offline models (all-MiniLM-L6-v2; spaCy for the parser OpenIE; no LLM):
dense passage vectors (faiss flat), BM25, MEGRAG's sentence and triple views (pysbd; parser triples), EviReform's
proposition index (parser propositions, then their vectors) and CARA's corpus graph (`corpus_kg`: passages and title
entities; with no LLM in the store it adds no triple entities), then its BM25 GlobalSearch index. Each stage records
its wall seconds and CPU seconds of this process (`time.process_time`: on a shared machine the wall time follows the
load, the CPU time far less), the units it made and the load average before it; then the search cost per question
over the dataset's questions (dense top 10, BM25 top 10, the cosine of each question to every proposition, CARA's
GlobalSearch k = 30). Model loading is timed apart.

Then the offline embedders (Table A.11's question, on this corpus): for each of `minilm`, `minilm@bf16` and the
test suite's hashing stand-in (`py:megrag_kit.testing:HashEmbedder`, no model), the dense passage Recall@5 /
Recall@10 of every question of the dataset over its corpus, and the same ranking read from the propositions (each
passage scored by its best proposition's cosine with the question: EviReform's question-only seed signal, no LLM).
Written as JSON (`--out`); the EviReform tables notebook (`nbs/52_evireform_tables.ipynb`) reads it. Nothing here
asserts a time."""
import argparse, json, os, platform, sys, tempfile, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def timed(fn):
    "Run `fn()`; `(result, wall s, CPU s, load average before)`."
    load = os.getloadavg()[0]
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, round(time.perf_counter() - w, 3), round(time.process_time() - c, 3), round(load, 2)


def recall(ranked, gold, k):
    "Recall@k of one question: the share of its gold passages in the first k of `ranked`."
    return len(set(ranked[:k]) & set(gold)) / len(gold) if gold else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="demo")
    ap.add_argument("--embedders", default="minilm,minilm@bf16,py:megrag_kit.testing:HashEmbedder")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/retriever_cost.json"))
    a = ap.parse_args()
    import torch
    from megrag_kit.data import load_dataset
    from megrag_kit.evireform import PropositionIndex, PropositionVectors, proposition_view
    from megrag_kit.index import EvidenceStore
    from megrag_kit.kg import KGTools, corpus_kg
    from megrag_kit.models import load_embedder
    ds = load_dataset(a.dataset)
    qs = [q.question for q in ds.questions]
    gold = [list(q.gold_pids) for q in ds.questions]
    rec = dict(command=" ".join(["python", *sys.argv]), dataset=ds.name, passages=len(ds.corpus), questions=len(qs),
               measured=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), cores=os.cpu_count(),
               torch_threads=torch.get_num_threads(), machine=platform.machine(), stages=[], search=[], embedders=[])
    emb, w, c, l = timed(lambda: load_embedder("minilm", "cpu"))
    emb.encode(["warm-up"])
    rec["model_load"] = dict(what="all-MiniLM-L6-v2", wall_s=w, cpu_s=c, load=l)

    def stage(retriever, what, fn, units):
        out, w, c, l = timed(fn)
        rec["stages"].append(dict(retriever=retriever, stage=what, wall_s=w, cpu_s=c, load=l, units=units(out)))
        print(rec["stages"][-1], flush=True)
        return out

    def search(retriever, what, fn):
        _, w, c, l = timed(fn)
        rec["search"].append(dict(retriever=retriever, search=what, ms_per_query_wall=round(1000 * w / len(qs), 3),
                                  ms_per_query_cpu=round(1000 * c / len(qs), 3), load=l))
        print(rec["search"][-1], flush=True)

    with tempfile.TemporaryDirectory() as d:
        st = EvidenceStore(ds, emb, None, root=d, openie_backend="parser", show_progress=False)
        stage("dense", "passage vectors (MiniLM) + faiss flat", lambda: st.build(["passage"]),
              lambda r: f"{r['passages']} passage vectors")
        stage("BM25", "BM25 index", lambda: st.build(["bm25"]), lambda r: f"{r['bm25_passages']} passages")
        stage("MEGRAG views", "sentence view (pysbd)", lambda: st.build(["sentence"]),
              lambda r: f"{r['sentences']} sentences")
        stage("MEGRAG views", "triple view (parser OpenIE)", lambda: st.build(["triple"]),
              lambda r: f"{r['triples']} triples")
        def propositions():
            v = proposition_view(st, "eager").load(); v.extract(range(len(st.passages))); return v
        view = stage("EviReform propositions", "propositions (parser)", propositions,
                     lambda v: f"{v.count()} propositions")
        pi = PropositionIndex(view, len(st.passages), emb, PropositionVectors(emb, Path(d) / "vectors"))
        stage("EviReform propositions", "proposition vectors (MiniLM) + entity/passage matrices",
              lambda: (pi.vectors(range(len(pi))), pi.M, pi.O), lambda r: f"{len(pi)} rows, {r[1].shape[1]} entities")
        kg = stage("CARA graph", "corpus graph (passages, title entities; no triple entities: corpus_kg adds them "
                   "only with the store's LLM)", lambda: corpus_kg(st),
                   lambda g: f"{len(g)} nodes, {g.n_edges} edges")
        def global_search_index():
            t = KGTools(kg, Path(d) / "kg"); t.bm25.build(); return t
        tools = stage("CARA graph", "GlobalSearch BM25 over node texts", global_search_index,
                      lambda t: f"{len(kg)} nodes")
        search("dense", "faiss flat top 10 (query encoded)", lambda: st.search(qs, 10))
        search("BM25", "BM25 top 10", lambda: st.search_bm25(qs, 10))
        search("EviReform propositions", "cosine to every proposition (query encoded)",
               lambda: pi.similarities(qs, None))
        search("CARA graph", "GlobalSearch k = 30", lambda: [tools.global_search(q, 30) for q in qs])
        for spec in a.embedders.split(","):
            e = load_embedder(spec, "cpu")
            P = np.asarray(e.encode([p.content for p in st.passages]), dtype=np.float32)
            Q = np.asarray(e.encode(qs), dtype=np.float32)
            X = np.asarray(e.encode(pi.texts), dtype=np.float32)
            dense_rank = np.argsort(-(Q @ P.T), axis=1, kind="stable")
            S = Q @ X.T                                                    # question x proposition cosine
            best = np.full((len(qs), len(st.passages)), -np.inf, dtype=np.float32)
            for j, p in enumerate(pi.pid): best[:, p] = np.maximum(best[:, p], S[:, j])
            prop_rank = np.argsort(-best, axis=1, kind="stable")
            r = dict(embedder=spec, model_id=getattr(e, "model_id", spec), dim=int(P.shape[1]))
            for name, rank in (("dense", dense_rank), ("propositions", prop_rank)):
                for k in (5, 10):
                    r[f"{name} recall@{k}"] = round(100 * float(np.mean(
                        [recall([int(x) for x in rank[i]], gold[i], k) for i in range(len(qs))])), 2)
            rec["embedders"].append(r)
            print(r, flush=True)
    rec["load_after"] = round(os.getloadavg()[0], 2)
    Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__": main()
