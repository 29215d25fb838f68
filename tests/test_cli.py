"""The runner over the method seam (the run contract, resume, refusals; nbs/90_runner.ipynb is another helper's, so
these stay here) and the command line with real models or spaCy (slow). The command line's own tests live beside the
code in nbs/99_cli.ipynb, and the resources' laziness in nbs/07_method.ipynb."""
import json, re
import pytest
from typer.testing import CliRunner
from megrag_kit.cli import app
from megrag_kit.data import load_dataset
from megrag_kit.method import METHODS, Answer, Method, Resources, build_method, register
from megrag_kit.models import Cost, cost_phase
from megrag_kit.reader import extract_answer
from megrag_kit.retrievers import slug
from megrag_kit.runner import run, compare_runs, read_predictions
from conftest import ScriptedLLM, needs_spacy


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


def test_run_writes_the_contract_and_resumes(demo, tmp_path):
    llm = ScriptedLLM(lambda prompt: "Cork")
    out = tmp_path / "run"
    s = run(build_method("oracle", {}, Resources(demo, llm, None)), demo, out, limit=3, batch_size=2, show_progress=False)
    rows = read_predictions(out / "predictions.jsonl")
    assert [r["id"] for r in rows] == [q.qid for q in demo.questions[:3]]
    r = rows[0]
    for k in ("id", "question", "gold_answers", "prediction", "retrieved", "llm_calls", "prompt_tokens", "completion_tokens", "latency_s", "trace", "indexing"):
        assert k in r
    assert r["em"] == 1.0 and r["recall@5"] == 1.0 and r["recall@1"] == 0.5 and r["hit@1"] == 1.0 and s["n"] == 3
    # question 2 is "A or B?": "Cork" is not an option, so it is re-asked once and counted as unparsed twice
    assert [x["llm_calls"] for x in rows] == [1, 2, 1] and [x["unparsed"] for x in rows] == [0, 2, 0] and [x["reasks"] for x in rows] == [0, 1, 0]
    assert s["llm_calls"] == 1.333 and s["tokens"] == 17.333 and s["prompt_tokens"] == 13.333 and s["unparsed_rate"] == 50.0
    assert s["em"] == pytest.approx(100 * sum(x["em"] for x in rows) / 3, abs=0.01) and s["ci"]["recall@20"] == [100.0, 100.0]
    m = json.loads((out / "summary.json").read_text())["manifest"]
    assert m["method"] == "oracle" and m["params"]["reader_max_passages"] == 3 and m["models"] == {"llm": "scripted"} and "git_commit" in m["versions"]
    # resume: only the 2 new questions are asked
    n = len(llm.seen)
    run(build_method("oracle", {}, Resources(demo, llm, None)), demo, out, limit=5, batch_size=2, show_progress=False)
    assert len(llm.seen) - n == 3 and len(read_predictions(out / "predictions.jsonl")) == 5   # question 4 is "A or B?": re-asked
    mf = json.loads((out / "run.json").read_text())                       # the manifest says what the folder holds now
    assert (mf["limit"], mf["n_questions"], [i["limit"] for i in mf["invocations"]]) == (5, 5, [3, 5])
    # another method or parameter into the same folder is refused, naming what differs
    differs = ("differs in method, params: method: 'oracle' in the folder, 'direct' now; "
               "params.reader_max_passages: 3 in the folder, 5 now")
    with pytest.raises(ValueError, match=re.escape(differs)):
        run(build_method("direct", {"reader_max_passages": 5}, Resources(demo, llm, None)), demo, out, limit=5, show_progress=False)


def test_a_changed_model_identity_refuses_to_resume(demo, tmp_path):
    a, b = ScriptedLLM(lambda p: "x"), ScriptedLLM(lambda p: "x")
    a.model_id, b.model_id = "hf:checkpoint-100@aaaaaaaaaaaa", "hf:checkpoint-100@bbbbbbbbbbbb"
    res_a = Resources(demo, a, None); res_a.llm_spec = "hf:runs/checkpoint-100"
    run(build_method("direct", {}, res_a), demo, tmp_path / "r", limit=1, show_progress=False)
    res_b = Resources(demo, b, None); res_b.llm_spec = "hf:runs/checkpoint-100"      # same spec, other weights
    with pytest.raises(ValueError, match="started with llm hf:checkpoint-100@aaaa"):
        run(build_method("direct", {}, res_b), demo, tmp_path / "r", limit=2, show_progress=False)


def test_a_cut_last_line_is_redone_and_a_bad_middle_line_is_an_error(demo, tmp_path):
    llm = ScriptedLLM(lambda p: "Cork")
    out = tmp_path / "r"
    run(build_method("direct", {}, Resources(demo, llm, None)), demo, out, limit=2, show_progress=False)
    f = out / "predictions.jsonl"
    lines = f.read_text().splitlines()
    f.write_text(lines[0] + "\n" + lines[1][:40])                   # killed while writing the second row
    with pytest.warns(RuntimeWarning, match="dropped a torn last line"):
        run(build_method("direct", {}, Resources(demo, llm, None)), demo, out, limit=2, show_progress=False)
    rows = read_predictions(f)
    assert [r["id"] for r in rows] == [q.qid for q in demo.questions[:2]] and len(f.read_text().splitlines()) == 2
    f.write_text("not json\n" + f.read_text())
    with pytest.raises(ValueError, match=r"line 1 is not JSON.*predictions\.jsonl"): read_predictions(f)


def test_indexing_cost_is_kept_apart(demo, tmp_path):
    "Calls made under cost_phase('indexing') (OpenIE) are shared among the batch, not counted as answering calls."
    @register
    class _Indexes(Method):
        name = "_test_indexing"
        def answer(self, questions):
            with cost_phase("indexing"): self.res.llm.generate(["index me", "and me"])
            g = self.res.llm.generate([q.question for q in questions])
            return [Answer("x", cost=Cost.of([x])) for x in g]
    try:
        s = run(build_method("_test_indexing", {}, Resources(demo, ScriptedLLM(lambda p: "x"), None)), demo, tmp_path / "r", limit=4, batch_size=4, show_progress=False)
        assert s["llm_calls"] == 1 and s["indexing"]["llm_calls"] == 0.5 and s["indexing"]["tokens"] == 6.5
    finally: del METHODS["_test_indexing"]


def test_compare_runs(demo, tmp_path):
    gold = {q.question: q.answers[0] for q in demo.questions}
    right = ScriptedLLM(lambda p: gold[p.split("Question: ")[-1]])
    run(build_method("oracle", {}, Resources(demo, right, None)), demo, tmp_path / "a", show_progress=False)
    run(build_method("direct", {}, Resources(demo, ScriptedLLM(lambda p: "unknown"), None)), demo, tmp_path / "b", show_progress=False)
    c = compare_runs(tmp_path / "a", tmp_path / "b")
    assert c["em"]["n"] == 30 and c["em"]["diff"] == 100.0 and c["em"]["lo"] == 100.0


@pytest.mark.slow
def test_cli_end_to_end_with_the_offline_models(tmp_path):
    res = CliRunner().invoke(app, ["run", "native_rag", "--dataset", "demo", "--limit", "2", "--out", str(tmp_path / "r"), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "native_rag on demo (n=2)" in res.output and "f1" in res.output
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["n"] == 2 and s["manifest"]["models"]["llm"].startswith("smollm2-135m-instruct-q4_1@") and s["manifest"]["models"]["embedder"].startswith("all-MiniLM-L6-v2@")
    assert s["llm_calls"] == 1 and s["prompt_tokens"] > 200
    rows = read_predictions(tmp_path / "r" / "predictions.jsonl")
    assert all(len(r["retrieved"]) == 10 for r in rows) and rows[0]["prediction"] == extract_answer(rows[0]["trace"]["raw"], rows[0]["question"])
    assert rows[1]["prediction"] in ("The More The Merrier", "Sleep, My Love")   # a comparison: decoded under the options enum


# -- the OpenIE backend on the command line


@needs_spacy
@pytest.mark.slow
def test_index_command_fills_the_triple_view_with_the_parser(tmp_path, monkeypatch):
    from typer.testing import CliRunner
    from megrag_kit.cli import app
    from megrag_kit.index import default_parser
    monkeypatch.setenv("MEGRAG_KIT_CACHE", str(tmp_path))     # a store of its own; no LLM is loaded for the parser backend
    r = CliRunner().invoke(app, ["index", "--dataset", "demo", "--views", "triple", "--openie-backend", "parser", "--embedder", "minilm",
                                 "--limit", "1", "--k", "2", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output[r.output.index("{"):])
    files = list(tmp_path.glob(f"stores/*/triples/{slug(default_parser().model_id)}.jsonl"))
    assert len(files) == 1 and rep["openie_done"] == 2 and len(files[0].read_text().splitlines()) == 2
    n = len(load_dataset("demo").corpus)                      # no --limit: the rest of the corpus, counted by this call
    r = CliRunner().invoke(app, ["index", "--dataset", "demo", "--views", "triple", "--openie-backend", "parser", "--device", "cpu"])
    rep = json.loads(r.output[r.output.index("{"):])
    assert r.exit_code == 0 and rep["openie_done"] == n - 2 and rep["passages_with_openie"] == n == len(files[0].read_text().splitlines())
