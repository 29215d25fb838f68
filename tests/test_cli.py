import json
import pytest
from typer.testing import CliRunner
from megrag_kit.cli import app, run_method, compare_runs, read_predictions
from megrag_kit.baselines import Reader, Direct, Oracle, extract_answer
from megrag_kit.data import load_dataset
from megrag_kit.index import EvidenceStore
from conftest import ScriptedLLM


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


def test_run_writes_the_contract_and_resumes(demo, tmp_path):
    llm = ScriptedLLM(lambda prompt: "Cork")
    store = EvidenceStore(demo, root=tmp_path / "store", show_progress=False)
    out = tmp_path / "run"
    s = run_method(Oracle(Reader(llm), store), demo, out, limit=3, batch_size=2, show_progress=False)
    rows = read_predictions(out / "predictions.jsonl")
    assert [r["id"] for r in rows] == [q.qid for q in demo.questions[:3]]
    r = rows[0]
    for k in ("id", "question", "gold_answers", "prediction", "retrieved", "llm_calls", "prompt_tokens", "completion_tokens", "latency_s", "trace"):
        assert k in r
    assert r["em"] == 1.0 and r["recall@5"] == 1.0 and s["n"] == 3 and s["llm_calls"] == 1 and s["tokens"] == 13
    assert s["em"] == pytest.approx(100 * sum(x["em"] for x in rows) / 3, abs=0.01)
    assert json.loads((out / "summary.json").read_text())["manifest"]["method"] == "oracle"
    # resume: only the 2 new questions are asked
    n = len(llm.seen)
    run_method(Oracle(Reader(llm), store), demo, out, limit=5, batch_size=2, show_progress=False)
    assert len(llm.seen) - n == 2 and len(read_predictions(out / "predictions.jsonl")) == 5
    # another method into the same folder is refused
    with pytest.raises(ValueError, match="holds another run"):
        run_method(Direct(Reader(llm)), demo, out, limit=5, show_progress=False)


def test_compare_runs(demo, tmp_path):
    store = EvidenceStore(demo, root=tmp_path / "store", show_progress=False)
    gold = {q.question: q.answers[0] for q in demo.questions}
    right = ScriptedLLM(lambda p: gold[p.split("Question: ")[-1]])
    run_method(Oracle(Reader(right), store), demo, tmp_path / "a", show_progress=False)
    run_method(Direct(Reader(ScriptedLLM(lambda p: "unknown"))), demo, tmp_path / "b", show_progress=False)
    c = compare_runs(tmp_path / "a", tmp_path / "b")
    assert c["em"]["n"] == 30 and c["em"]["diff"] == 100.0 and c["em"]["lo"] == 100.0


def test_cli_end_to_end_with_the_offline_models(tmp_path):
    res = CliRunner().invoke(app, ["run", "--method", "native_rag", "--dataset", "demo", "--limit", "2", "--out", str(tmp_path / "r"), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "native_rag on demo (n=2)" in res.output and "f1" in res.output
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["n"] == 2 and s["manifest"]["llm"] == "smollm2-135m-instruct-q4_1" and s["manifest"]["embedder"] == "all-MiniLM-L6-v2"
    assert s["llm_calls"] == 1 and s["prompt_tokens"] > 200
    rows = read_predictions(tmp_path / "r" / "predictions.jsonl")
    assert all(len(r["retrieved"]) == 10 for r in rows) and rows[0]["prediction"] == extract_answer(rows[0]["trace"]["raw"], rows[0]["question"])
    assert rows[1]["prediction"] in ("The More The Merrier", "Sleep, My Love")   # a comparison: decoded under the options enum


def test_cli_unknown_method_and_dataset(tmp_path):
    r = CliRunner().invoke(app, ["run", "--method", "nope", "--dataset", "demo"])
    assert r.exit_code != 0 and "unknown method" in r.output
    r = CliRunner().invoke(app, ["run", "--method", "megrag", "--variant", "nonsense", "--dataset", "demo"])
    assert r.exit_code == 2 and "unknown variant 'nonsense'" in r.output and "Traceback" not in r.output   # refused before any model loads
    r = CliRunner().invoke(app, ["datasets"])
    assert r.exit_code == 0 and "2wikimultihopqa" in r.output and "demo" in r.output
