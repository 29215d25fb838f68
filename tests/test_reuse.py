"""Committed runs are reused as they are: reading a complete run writes nothing, and the reproduction's dry run counts
the runs it would answer anew (zero on a fresh clone)."""
import json
from pathlib import Path
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.method import Resources, build_method
from megrag_kit.runner import run, read_predictions
from conftest import ScriptedLLM


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


def test_reading_a_complete_run_writes_no_file_and_asks_nothing(demo, tmp_path):
    llm = ScriptedLLM(lambda p: "Cork")
    out = tmp_path / "run"
    first = run(build_method("direct", {}, Resources(demo, llm, None)), demo, out, limit=3, show_progress=False)
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    n = len(llm.seen)
    again = run(build_method("direct", {}, Resources(demo, llm, None)), demo, out, limit=3, show_progress=False)
    assert len(llm.seen) == n                                          # no question asked again
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before   # run.json keeps one invocation, no rewrite
    assert len(json.loads((out / "run.json").read_text())["invocations"]) == 1
    assert {k: again[k] for k in ("n", "em", "f1")} == {k: first[k] for k in ("n", "em", "f1")}
    # a subset of a complete run is read too, summarized over its own questions, and still writes nothing
    sub = run(build_method("direct", {}, Resources(demo, llm, None)), demo, out, limit=2, show_progress=False)
    assert sub["n"] == 2 and len(llm.seen) == n and {f.name: f.read_bytes() for f in out.iterdir()} == before
    # one more question is work: answered, appended, and the manifest records the new start
    run(build_method("direct", {}, Resources(demo, llm, None)), demo, out, limit=4, show_progress=False)
    assert len(read_predictions(out / "predictions.jsonl")) == 4
    assert [i["limit"] for i in json.loads((out / "run.json").read_text())["invocations"]] == [3, 4]


@pytest.mark.slow
def test_the_committed_demo_reproduction_is_reused_whole():
    """A clone's `megrag-kit experiment run experiments/reproduce-demo.toml --dry-run` (the README's `reproduce
    --profile demo`, declared): every run the notebooks read is committed and complete (real models: their
    identities)."""
    from megrag_kit.experiment import run_experiment
    root = Path(__file__).resolve().parents[1]
    [cell] = run_experiment(root / "experiments" / "reproduce-demo.toml", dry_run=True, show_progress=False)
    assert (cell["name"], cell["state"], cell["out"]) == ("reproduce", "complete", root / "runs" / "reproduce-demo")
    d = cell["notebooks"]
    assert all(v["stopped"] is None for v in d.values())
    assert sum(len(v["runs"]) for v in d.values()) > 50
    assert {n: v["to_answer"] for n, v in d.items()} == {n: 0 for n in d}


def test_a_figure_saved_twice_has_the_same_bytes(tmp_path):
    "A reproduction that re-draws a figure from the same runs leaves its SVG as it was (no date, fixed id salt)."
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from megrag_kit.reproduce import Experiment
    got = []
    for _ in range(2):
        e = Experiment("x", dict(out=str(tmp_path), device="cpu", seed=0))
        fig, ax = plt.subplots(); ax.plot([1, 2], [3, 4]); ax.set_title("a title")
        e.figure(fig, "f"); plt.close(fig)
        got.append((tmp_path / "figures" / "f.svg").read_bytes())
    assert got[0] == got[1] and b"<dc:date>" not in got[0]


def test_the_committed_reproduction_records_name_no_absolute_path():
    "The provenance records of the committed demo reproduction name paths inside the repository relative to it, so a clone that reproduces the same runs writes the same paths."
    root = Path(__file__).resolve().parents[1]
    def strings(x):
        if isinstance(x, dict): yield from (s for v in x.values() for s in strings(v))
        elif isinstance(x, list): yield from (s for v in x for s in strings(v))
        elif isinstance(x, str): yield x
    recs = sorted((root / "runs" / "reproduce-demo" / "results").glob("*.json"))
    assert len(recs) == 4
    for f in recs:
        bad = [s for s in strings(json.loads(f.read_text())) if s.startswith("/") and "/runs/" in s]
        assert bad == [], f"{f.name}: {bad[:3]}"


def test_the_committed_executed_notebooks_name_no_absolute_or_staging_path():
    "The executed notebooks of the committed demo reproduction: papermill's paths relative to the repository, no staging folder in any output."
    root = Path(__file__).resolve().parents[1]
    nbs = sorted((root / "runs" / "reproduce-demo" / "notebooks").glob("*.ipynb"))
    assert len(nbs) == 4
    for f in nbs:
        meta = json.loads(f.read_text())["metadata"]["papermill"]
        assert not meta["input_path"].startswith("/") and meta["output_path"] == f"runs/reproduce-demo/notebooks/{f.name}"
        assert ".stage-" not in f.read_text(), f.name
